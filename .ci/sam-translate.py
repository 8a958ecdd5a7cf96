#!/usr/bin/env python3
"""Expand template.yaml with the AWS SAM translator, offline, and print the
CloudFormation it becomes as JSON. functions/template_test.go runs this and
checks the resources a deployment gets. Needs the samtranslator package,
which cfn-lint brings."""
import json
import os
import sys

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from samtranslator.translator.transform import transform  # noqa: E402
from samtranslator.yaml_helper import yaml_parse  # noqa: E402


class ManagedPolicies:
    """The managed policies SAM attaches, resolved without calling IAM."""

    def load(self):
        base = "arn:aws:iam::aws:policy/service-role/"
        return {
            "AWSLambdaBasicExecutionRole": base + "AWSLambdaBasicExecutionRole",
            "AWSLambdaVPCAccessExecutionRole": base + "AWSLambdaVPCAccessExecutionRole",
        }


def main(path, overrides):
    with open(path) as f:
        template = yaml_parse(f.read())
    # `sam build` replaces local CodeUri folders with uploaded artifacts;
    # the translator only accepts the latter.
    for name, res in template["Resources"].items():
        if res["Type"] == "AWS::Serverless::Function":
            res["Properties"]["CodeUri"] = "s3://artifacts/" + name
    params = dict(kv.split("=", 1) for kv in overrides)
    out = transform(template, params, ManagedPolicies(), passthrough_metadata=True)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
