package functions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ft251/ratelimit/internal/envconfig"
)

// expandTemplate runs template.yaml through the AWS SAM translator, as
// CloudFormation does at deploy time, and returns the resources and outputs.
// The translator is Python (it comes with cfn-lint); without it the test
// skips, loudly, unless RATELIMIT_REQUIRE_TOOLS is set, as .ci/run sets it.
func expandTemplate(t *testing.T) (resources, outputs map[string]any) {
	tpl := expand(t)
	return tpl.Resources, tpl.Outputs
}

type expanded struct {
	Parameters map[string]struct {
		Default        any
		AllowedPattern string
		AllowedValues  []any
	}
	Resources map[string]any
	Outputs   map[string]any
	Rules     map[string]struct {
		RuleCondition any
		Assertions    []struct{ Assert any }
	}
	Metadata struct {
		Interface struct {
			ParameterGroups []struct{ Parameters []string }
		} `json:"AWS::CloudFormation::Interface"`
	}
}

func expand(t *testing.T) expanded {
	t.Helper()
	out, err := translate()
	if err != nil {
		msg := "SAM translator unavailable (python3 with samtranslator, which cfn-lint installs): " + err.Error()
		if os.Getenv("RATELIMIT_REQUIRE_TOOLS") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED, template not checked: " + msg)
	}
	var tpl expanded
	if err := json.Unmarshal(out, &tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

// translate runs the translator on template.yaml once for all the tests
// that read the expansion (a few seconds of Python each time); each
// decodes a copy of its own.
var translate = sync.OnceValues(func() ([]byte, error) {
	cmd := exec.Command("python3", filepath.Join("..", ".ci", "sam-translate.py"), filepath.Join("..", "template.yaml"))
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, stderr)
	}
	return out, nil
})

// TestTemplateParametersAcceptOnlyWhatTheFunctionsAccept tries awkward
// values against each parameter that becomes a function's environment
// variable: whatever CloudFormation would accept, the functions must accept
// at init, or the stack deploys and then every function fails to start.
func TestTemplateParametersAcceptOnlyWhatTheFunctionsAccept(t *testing.T) {
	t.Parallel()
	tpl := expand(t)
	env := map[string]string{
		"RateLimit": "RATE_LIMIT", "WindowSeconds": "WINDOW_SECONDS", "ClientKeySource": "CLIENT_KEY_SOURCE",
		"FailMode": "FAIL_MODE", "AuditRetention": "AUDIT_RETENTION", "BusyTimeout": "BUSY_TIMEOUT", "RejectCache": "REJECT_CACHE",
		"Store": "STORE", "Shadow": "SHADOW", "SqliteShards": "SQLITE_SHARDS", "SqliteJournalMode": "JOURNAL_MODE",
	}
	candidates := []string{"", "0", "1", "1.5", "-1", "3", "60", "2592000", "2592001", "99999999999999999999",
		"0s", "0ms", "1ms", "9999ms", "10000ms", "9s", "10s", "25s", "1h", "0d", "1d", "30d", "36500d", "36501d", "9999d",
		"720h", "999999h", "1m", "header", "source-ip", "claim:", "claim:sub", "x-forwarded-for", "closed", "open", "on", "off", "maybe",
		"sqlite", "dynamodb", "redis", "4", "16", "64", "65", "010", "DELETE", "TRUNCATE", "PERSIST", "WAL", "truncate",
		"999999999999999", "1000000000000000", "claim:a b", "claim:a\tb", "claim:" + strings.Repeat("x", 129),
		// Control characters, Unicode spaces, and 128 characters that are
		// more than 128 bytes: each stopped every function at init.
		"claim:a\x01b", "claim:a\x7fb", "claim:a\u00a0b", "claim:a\u2003b", "claim:" + strings.Repeat("é", 70)}
	for param, name := range env {
		p, ok := tpl.Parameters[param]
		if !ok {
			t.Errorf("template has no parameter %s", param)
			continue
		}
		re := regexp.MustCompile(p.AllowedPattern)
		for _, v := range append(candidates, fmt.Sprint(p.Default)) {
			if p.AllowedPattern != "" && !re.MatchString(v) || len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, any(v)) {
				continue // CloudFormation refuses it before anything runs
			}
			if _, err := readEnv(func(k string) string {
				// The template gives every function DB_PATH and, with
				// DynamoDB, TABLE_NAME.
				return map[string]string{"DB_PATH": "/mnt/efs/ratelimit.db", "TABLE_NAME": "counters", name: v}[k]
			}); err != nil {
				t.Errorf("%s=%q passes the template but the functions refuse it: %v", param, v, err)
			}
		}
	}
}

// TestEveryTemplateParameterHasItsPlaceInTheConsole: CloudFormation's
// console lists the parameters of no group after all the groups, under
// "Other parameters", where whoever deploys the stack by hand is least
// likely to read them; Policies, Shadow and StoreErrorAlarmTopicArn were
// there. Each parameter is in one group, and each name a group lists is a
// parameter.
func TestEveryTemplateParameterHasItsPlaceInTheConsole(t *testing.T) {
	t.Parallel()
	tpl := expand(t)
	groups := map[string]int{}
	for _, g := range tpl.Metadata.Interface.ParameterGroups {
		for _, p := range g.Parameters {
			groups[p]++
			if _, ok := tpl.Parameters[p]; !ok {
				t.Errorf("a parameter group lists %s, which the template does not have", p)
			}
		}
	}
	for p := range tpl.Parameters {
		if groups[p] != 1 {
			t.Errorf("parameter %s is in %d parameter groups, want 1", p, groups[p])
		}
	}
}

// TestTemplateAcceptsThePoliciesTheREADMEShows checks the Policies
// parameter both ways: the examples of the README and of docs/ pass its
// pattern and the functions' configuration. A pattern cannot tell good
// JSON from bad, so docs/policies.md gives a command that checks a value
// before it is deployed.
func TestTemplateAcceptsThePoliciesTheREADMEShows(t *testing.T) {
	t.Parallel()
	tpl := expand(t)
	p := tpl.Parameters["Policies"]
	re := regexp.MustCompile(p.AllowedPattern)
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var docs []byte
	for _, page := range append([]string{filepath.Join("..", "README.md")}, pages...) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b...)
	}
	// Every one-line POLICIES='[...]' in the README and docs/.
	examples := regexp.MustCompile(`POLICIES='(\[[^'\n]*\])'`).FindAllStringSubmatch(string(docs), -1)
	if len(examples) < 4 {
		t.Fatalf("README and docs/ show %d one-line POLICIES examples, want at least 4", len(examples))
	}
	for _, v := range append([]string{""}, func() (vs []string) {
		for _, e := range examples {
			vs = append(vs, e[1])
		}
		return vs
	}()...) {
		if !re.MatchString(v) {
			t.Errorf("Policies pattern %s refuses %q", p.AllowedPattern, v)
		}
		if _, err := readEnv(func(k string) string {
			return map[string]string{"DB_PATH": "/mnt/efs/ratelimit.db", "POLICIES": v}[k]
		}); err != nil {
			t.Errorf("documented POLICIES=%q is refused: %v", v, err)
		}
	}
	for _, v := range []string{"ping:3/60s", "{}", `[{"name":"a"}]` + "\n"} {
		if re.MatchString(v) {
			t.Errorf("Policies pattern accepts %q, which is not one line of a JSON array", v)
		}
	}
}

// at walks v along keys (map keys, or list indexes as ints).
func at(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// pick resolves an {"Fn::If": [UseSQLite or UseDynamoDB, a, b]} for the
// SQLite deployment (sqlite) or the DynamoDB one: AWS::NoValue becomes nil.
// Anything else is returned as is.
func pick(v any, sqlite bool) any {
	args, ok := at(v, "Fn::If").([]any)
	if !ok || len(args) != 3 {
		return v
	}
	then := args[0] == "UseSQLite" == sqlite
	v = args[2]
	if then {
		v = args[1]
	}
	if at(v, "Ref") == "AWS::NoValue" {
		return nil
	}
	return v
}

func getAtt(name, attr string) any { return map[string]any{"Fn::GetAtt": []any{name, attr}} }
func ref(name string) any          { return map[string]any{"Ref": name} }

func TestTemplateExpandsToTheDeployment(t *testing.T) {
	t.Parallel()
	res, outputs := expandTemplate(t)
	want := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %s, want %s", what, jsonOf(got), jsonOf(want))
		}
	}

	// Each store's deployment: what an !If on UseSQLite picks.
	for _, fn := range []string{"PingFunction", "StatusFunction", "PruneFunction", "AdminFunction"} {
		f := res[fn]
		want(fn+" type", at(f, "Type"), "AWS::Lambda::Function")
		p := at(f, "Properties")
		want(fn+" runtime", at(p, "Runtime"), "provided.al2023")
		want(fn+" architectures", at(p, "Architectures"), []any{"arm64"})
		want(fn+" handler", at(p, "Handler"), "bootstrap")
		want(fn+" build method", at(f, "Metadata", "BuildMethod"), "go1.x")
		want(fn+" mounts (SQLite)", pick(at(p, "FileSystemConfigs"), true), []any{map[string]any{"Arn": getAtt("AccessPoint", "Arn"), "LocalMountPath": "/mnt/efs"}})
		want(fn+" DB_PATH", at(p, "Environment", "Variables", "DB_PATH"), "/mnt/efs/ratelimit.db")
		want(fn+" STORE", at(p, "Environment", "Variables", "STORE"), ref("Store"))
		want(fn+" security groups (SQLite)", at(pick(at(p, "VpcConfig"), true), "SecurityGroupIds"), []any{ref("FunctionSecurityGroup")})
		want(fn+" subnets (SQLite)", len(at(pick(at(p, "VpcConfig"), true), "SubnetIds").([]any)), 2)
		// Lambda refuses a file system without a mount target in every
		// zone: the functions wait for both, through a handle, because
		// DependsOn cannot name a resource a condition may leave out.
		want(fn+" depends on", at(f, "DependsOn"), "StorageReady")
		for _, env := range []string{"RATE_LIMIT", "WINDOW_SECONDS", "CLIENT_KEY_SOURCE", "FAIL_MODE", "AUDIT_RETENTION", "BUSY_TIMEOUT", "REJECT_CACHE", "SQLITE_SHARDS"} {
			if at(p, "Environment", "Variables", env) == nil {
				t.Errorf("%s has no %s", fn, env)
			}
		}
		// The folder sam build compiles holds a main package.
		if _, err := os.Stat(filepath.Join(strings.ToLower(strings.TrimSuffix(fn, "Function")), "main.go")); err != nil {
			t.Errorf("%s: %v", fn, err)
		}
	}
	want("storage ready", at(res, "StorageReady", "Metadata", "Storage"), map[string]any{"Fn::If": []any{"UseSQLite",
		[]any{ref("MountTargetA"), ref("MountTargetB")}, []any{ref("CountersTable")}}})
	for _, fn := range []string{"PingFunction", "StatusFunction"} {
		p := at(res, fn, "Properties")
		want(fn+" mounts (DynamoDB)", pick(at(p, "FileSystemConfigs"), false), nil)
		want(fn+" VPC (DynamoDB)", pick(at(p, "VpcConfig"), false), nil)
		want(fn+" TABLE_NAME", at(p, "Environment", "Variables", "TABLE_NAME"), map[string]any{"Fn::If": []any{"UseDynamoDB", ref("CountersTable"), ""}})
	}

	// Least privilege. On EFS: ping and prune mount read-write through the
	// access point; status may only mount, which makes its mount read-only.
	// On DynamoDB: ping may update, put and get items of the table, status
	// only get them.
	actions := func(role string, sqlite bool, service string) []string {
		var acts []string
		for _, pol := range at(res, role, "Properties", "Policies").([]any) {
			pol = pick(pol, sqlite)
			if pol == nil {
				continue
			}
			for _, st := range at(pol, "PolicyDocument", "Statement").([]any) {
				a := at(st, "Action")
				list, ok := a.([]any)
				if !ok {
					list = []any{a}
				}
				for _, x := range list {
					if !strings.HasPrefix(x.(string), service+":") {
						continue
					}
					acts = append(acts, x.(string))
					if service == "elasticfilesystem" {
						want(role+" EFS condition", jsonOf(at(st, "Condition", "StringEquals", "elasticfilesystem:AccessPointArn")) != "null", true)
					} else {
						want(role+" table", at(st, "Resource"), getAtt("CountersTable", "Arn"))
					}
				}
			}
		}
		slices.Sort(acts)
		return acts
	}
	want("PingFunctionRole EFS actions", actions("PingFunctionRole", true, "elasticfilesystem"), []string{"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"})
	want("PruneFunctionRole EFS actions", actions("PruneFunctionRole", true, "elasticfilesystem"), []string{"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"})
	want("StatusFunctionRole EFS actions", actions("StatusFunctionRole", true, "elasticfilesystem"), []string{"elasticfilesystem:ClientMount"})
	want("AdminFunctionRole EFS actions", actions("AdminFunctionRole", true, "elasticfilesystem"), []string{"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"})
	want("AdminFunctionRole DynamoDB actions", actions("AdminFunctionRole", false, "dynamodb"),
		[]string{"dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem"})
	want("PingFunctionRole DynamoDB actions with SQLite", actions("PingFunctionRole", true, "dynamodb"), []string(nil))
	want("PingFunctionRole DynamoDB actions", actions("PingFunctionRole", false, "dynamodb"),
		[]string{"dynamodb:BatchGetItem", "dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"})
	want("StatusFunctionRole DynamoDB actions", actions("StatusFunctionRole", false, "dynamodb"),
		[]string{"dynamodb:BatchGetItem", "dynamodb:DescribeTable", "dynamodb:GetItem"})
	want("PingFunctionRole EFS actions with DynamoDB", actions("PingFunctionRole", false, "elasticfilesystem"), []string(nil))

	// Which resources each store gets.
	for name, cond := range map[string]string{
		"PruneFunction": "UseSQLite", "PruneFunctionSchedule": "UseSQLite", "FileSystem": "UseSQLite", "MountTargetA": "UseSQLite",
		"MountTargetB": "UseSQLite", "AccessPoint": "UseSQLite", "FunctionSecurityGroup": "UseSQLite", "Vpc": "CreateNetwork",
		"CountersTable": "UseDynamoDB", "PingFunction": "", "StatusFunction": "", "HttpApi": "",
	} {
		if got, _ := at(res, name, "Condition").(string); got != cond {
			t.Errorf("%s has condition %q, want %q", name, got, cond)
		}
	}
	tbl := at(res, "CountersTable", "Properties")
	want("table billing", at(tbl, "BillingMode"), "PAY_PER_REQUEST")
	want("table TTL", at(tbl, "TimeToLiveSpecification"), map[string]any{"AttributeName": "expires_at", "Enabled": true})
	want("table PITR", at(tbl, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"), true)
	want("table deletion protection", at(tbl, "DeletionProtectionEnabled"), ref("TableDeletionProtection"))
	// The data outlives the stack: sam delete leaves it.
	for _, name := range []string{"CountersTable", "FileSystem"} {
		want(name+" deletion policy", at(res, name, "DeletionPolicy"), "Retain")
		want(name+" update replace policy", at(res, name, "UpdateReplacePolicy"), "Retain")
	}
	want("table keys", at(tbl, "KeySchema"), []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}, map[string]any{"AttributeName": "sk", "KeyType": "RANGE"}})
	// EFS grants everything to every client without a file system policy.
	if at(res, "FileSystem", "Properties", "FileSystemPolicy") == nil {
		t.Error("the file system has no policy, so EFS would let any client write")
	}

	// Routes: GET /ping, GET /status and POST /check on one HTTP API,
	// $default stage.
	paths := at(res, "HttpApi", "Properties", "Body", "paths")
	for route, fn := range map[string]string{"get /ping": "PingFunction", "get /status": "StatusFunction", "post /check": "PingFunction",
		"put /admin/overrides/{policy}/{key}": "AdminFunction", "get /admin/overrides/{policy}/{key}": "AdminFunction",
		"delete /admin/overrides/{policy}/{key}": "AdminFunction", "delete /admin/counters/{policy}/{key}": "AdminFunction"} {
		method, path, _ := strings.Cut(route, " ")
		integ := at(paths, path, method, "x-amazon-apigateway-integration")
		want(route+" payload format", at(integ, "payloadFormatVersion"), "2.0")
		if uri := jsonOf(at(integ, "uri")); !strings.Contains(uri, "${"+fn+".Arn}") {
			t.Errorf("%s integrates %s, want %s", route, uri, fn)
		}
	}
	want("routes", len(paths.(map[string]any)), 5)
	for path, methods := range map[string][]string{"/admin/overrides/{policy}/{key}": {"put", "get", "delete"}, "/admin/counters/{policy}/{key}": {"delete"}} {
		for _, m := range methods {
			want(m+" "+path+" security", at(paths, path, m, "security"), []any{map[string]any{"AWS_IAM": []any{}}})
		}
	}
	// /status reveals who calls how often, and /check's caller names the
	// key: IAM only. /ping is public.
	want("/status security", at(paths, "/status", "get", "security"), []any{map[string]any{"AWS_IAM": []any{}}})
	want("/check security", at(paths, "/check", "post", "security"), []any{map[string]any{"AWS_IAM": []any{}}})
	want("/ping security", at(paths, "/ping", "get", "security"), nil)
	want("stage", at(res, "HttpApiApiGatewayDefaultStage", "Properties", "StageName"), "$default")
	// API Gateway turns away what the store could not decide in time.
	want("stage throttling", at(res, "HttpApiApiGatewayDefaultStage", "Properties", "DefaultRouteSettings"),
		map[string]any{"ThrottlingRateLimit": ref("ThrottleRate"), "ThrottlingBurstLimit": ref("ThrottleBurst")})

	// Schedule and its single prune at a time.
	want("schedule", at(res, "PruneFunctionSchedule", "Properties", "ScheduleExpression"), ref("PruneSchedule"))
	want("schedule target", at(res, "PruneFunctionSchedule", "Properties", "Targets", 0, "Arn"), getAtt("PruneFunction", "Arn"))
	want("prune concurrency", at(res, "PruneFunction", "Properties", "ReservedConcurrentExecutions"), float64(1))
	want("ping concurrency", at(res, "PingFunction", "Properties", "ReservedConcurrentExecutions"),
		map[string]any{"Fn::If": []any{"CapPing", ref("PingConcurrency"), ref("AWS::NoValue")}})

	// Network: functions may only speak NFS to the file system's group,
	// which admits them through a separate ingress rule.
	want("function egress", at(res, "FunctionSecurityGroup", "Properties", "SecurityGroupEgress"), []any{map[string]any{
		"Description": "NFS to the EFS mount targets", "IpProtocol": "tcp", "FromPort": float64(2049), "ToPort": float64(2049),
		"DestinationSecurityGroupId": ref("FileSystemSecurityGroup"),
	}})
	ing := at(res, "FileSystemIngressFromFunctions", "Properties")
	want("ingress group", at(ing, "GroupId"), ref("FileSystemSecurityGroup"))
	want("ingress source", at(ing, "SourceSecurityGroupId"), ref("FunctionSecurityGroup"))
	want("ingress port", []any{at(ing, "IpProtocol"), at(ing, "FromPort"), at(ing, "ToPort")}, []any{"tcp", float64(2049), float64(2049)})
	if at(res, "FileSystemSecurityGroup", "Properties", "SecurityGroupIngress") != nil {
		t.Error("the file system's group has inline ingress rules")
	}
	want("subnet zones differ", at(res, "SubnetA", "Properties", "AvailabilityZone", "Fn::Select", 0) != at(res, "SubnetB", "Properties", "AvailabilityZone", "Fn::Select", 0), true)
	for _, kind := range []string{"AWS::EC2::InternetGateway", "AWS::EC2::NatGateway"} {
		for name, r := range res {
			if at(r, "Type") == kind {
				t.Errorf("%s is a %s: the subnets must stay isolated", name, kind)
			}
		}
	}

	// Storage.
	want("encrypted", at(res, "FileSystem", "Properties", "Encrypted"), true)
	want("mount target A", at(res, "MountTargetA", "Properties", "FileSystemId"), ref("FileSystem"))
	want("mount target B", at(res, "MountTargetB", "Properties", "FileSystemId"), ref("FileSystem"))
	ap := at(res, "AccessPoint", "Properties")
	want("posix user", at(ap, "PosixUser"), map[string]any{"Uid": "1000", "Gid": "1000"})
	want("root directory", at(ap, "RootDirectory"), map[string]any{"Path": "/ratelimit",
		"CreationInfo": map[string]any{"OwnerUid": "1000", "OwnerGid": "1000", "Permissions": "0750"}})

	for _, o := range []string{"ApiUrl", "PingFunctionArn", "StatusFunctionArn", "PruneFunctionArn", "FileSystemId"} {
		if outputs[o] == nil {
			t.Errorf("no output %s", o)
		}
	}
}

// TestDeployDefaultsAreSafe: what `sam deploy` deploys without being asked
// keys on what a client cannot choose, keeps audit rows a bounded time and
// throttles the stage, in the template's defaults and in samconfig.toml
// alike. (The local server keeps the design note's X-Client-Key.)
func TestDeployDefaultsAreSafe(t *testing.T) {
	t.Parallel()
	tpl := expand(t)
	samconfig, err := os.ReadFile(filepath.Join("..", "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	overrides := regexp.MustCompile(`(?m)^parameter_overrides = "(.*)"$`).FindStringSubmatch(string(samconfig))
	if overrides == nil {
		t.Fatal("samconfig.toml has no parameter_overrides")
	}
	for param, want := range map[string]string{"ClientKeySource": "source-ip", "AuditRetention": "30d", "ThrottleRate": "15", "ThrottleBurst": "30"} {
		if got := fmt.Sprint(tpl.Parameters[param].Default); got != want {
			t.Errorf("template default %s = %q, want %q", param, got, want)
		}
		if !strings.Contains(" "+overrides[1]+" ", " "+param+"="+want+" ") {
			t.Errorf("samconfig.toml deploys %s other than %s: %s", param, want, overrides[1])
		}
	}
	if _, err := envconfig.ParseKeySource(fmt.Sprint(tpl.Parameters["ClientKeySource"].Default)); err != nil {
		t.Error(err)
	}
}

// readEnv reads the configuration as the Lambda functions do.
func readEnv(getenv func(string) string) (envconfig.Config, error) {
	return envconfig.Read(getenv, envconfig.Lambda)
}

// TestAPartOfAnExistingNetworkIsRefused: the three ids of an existing
// network go together; one or two alone were ignored without a word, and
// a new network made beside the one meant. The template's rule refuses
// them before anything is made, as CloudFormation evaluates it here.
func TestAPartOfAnExistingNetworkIsRefused(t *testing.T) {
	t.Parallel()
	rule, ok := expand(t).Rules["ExistingNetworkIsWhole"]
	if !ok || len(rule.Assertions) != 1 {
		t.Fatalf("template has no rule ExistingNetworkIsWhole with one assertion: %+v", rule)
	}
	ids := []string{"ExistingVpcId", "ExistingSubnetA", "ExistingSubnetB"}
	values := []string{"vpc-0123456789abcdef0", "subnet-0123456789abcdef0", "subnet-0123456789abcdef1"}
	for mask := range 8 {
		params := map[string]string{}
		given := 0
		for i, id := range ids {
			if mask&(1<<i) != 0 {
				params[id], given = values[i], given+1
			} else {
				params[id] = ""
			}
		}
		refused := ruleValue(t, rule.RuleCondition, params) && !ruleValue(t, rule.Assertions[0].Assert, params)
		if want := given == 1 || given == 2; refused != want {
			t.Errorf("%v: refused %v, want %v", params, refused, want)
		}
	}
}

// ruleValue evaluates a rule's condition as CloudFormation would, for the
// functions the rule uses, with params for each Ref.
func ruleValue(t *testing.T, v any, params map[string]string) bool {
	t.Helper()
	m, _ := v.(map[string]any)
	args, _ := func() ([]any, bool) {
		for _, a := range m {
			l, ok := a.([]any)
			return l, ok
		}
		return nil, false
	}()
	str := func(a any) string {
		if r, ok := a.(map[string]any); ok {
			return params[fmt.Sprint(r["Ref"])]
		}
		return fmt.Sprint(a)
	}
	switch {
	case m["Fn::Equals"] != nil:
		return str(args[0]) == str(args[1])
	case m["Fn::Not"] != nil:
		return !ruleValue(t, args[0], params)
	case m["Fn::And"] != nil, m["Fn::Or"] != nil:
		and := m["Fn::And"] != nil
		for _, a := range args {
			if ruleValue(t, a, params) != and {
				return !and
			}
		}
		return and
	}
	t.Fatalf("a rule function this test does not know: %v", v)
	return false
}
