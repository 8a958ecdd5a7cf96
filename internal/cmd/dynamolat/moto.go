package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// serve runs moto_server one request at a time, as dynamotest does, with
// one change to its TransactWriteItems. moto copies every table a
// transaction touches, whole, before it applies the transaction, to roll
// back if a condition fails: a cost that grows with the table (each audit
// record makes every later transaction slower; with 1,000 counters one took
// about 100 ms) and that DynamoDB does not have. Here the conditions are
// evaluated first, on the items as they are (a transaction never touches
// one item twice, so that is what moto's own sequence sees): if one fails,
// the transaction is cancelled with the reasons moto gives (the item too,
// when asked for with ALL_OLD), having written nothing; if all hold, moto
// applies the transaction without the copy. Anything else goes to moto's
// own code, copy and all.
const serve = `import copy, sys, werkzeug.serving, moto.server as m
import moto.dynamodb.models as dm
from moto.dynamodb.exceptions import TransactionCanceledException

original = dm.DynamoDBBackend.transact_write_items

class NoCopy:
    @staticmethod
    def deepcopy(x, memo=None):
        return x

def transact_write_items(self, transact_items):
    errors, failed = [], False
    try:
        for item in transact_items:
            op_type, op = next(iter(item.items()))
            cond = op.get("ConditionExpression")
            if cond is None:
                errors.append((None, None, None))
                continue
            if op_type == "Put":
                table = self.get_table(op["TableName"])
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            current = self.get_item(op["TableName"], key)
            holds = dm.get_filter_expression(cond, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")).expr(current)
            if holds:
                errors.append((None, None, None))
                continue
            old = None
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                old = current.to_json()["Attributes"]
            errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
            failed = True
    except Exception:
        return original(self, transact_items)
    if failed:
        raise TransactionCanceledException(errors)
    dm.copy = NoCopy
    try:
        return original(self, transact_items)
    finally:
        dm.copy = copy

dm.DynamoDBBackend.transact_write_items = transact_write_items
app = m.DomainDispatcherApplication(m.create_backend_app)
werkzeug.serving.run_simple(sys.argv[1], int(sys.argv[2]), app, threaded=False)`

// moto is a running moto_server.
type moto struct {
	endpoint string
	cmd      *exec.Cmd
}

// startMoto starts moto_server (see serve) on a free loopback port and
// waits until it answers.
func startMoto() (*moto, error) {
	python, err := interpreter()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(python, "-c", serve, "127.0.0.1", fmt.Sprint(port))
	cmd.Stderr = nil // moto logs every request
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &moto{endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(m.endpoint + "/moto-api/"); err == nil {
			resp.Body.Close()
			return m, nil
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("moto_server did not answer on %s within 30 s", m.endpoint)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills the server and its children by its process group.
func (m *moto) stop() {
	syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	m.cmd.Wait()
}

// interpreter is the Python that runs moto_server: the one its script's
// first line names, behind a pyenv shim the one pyenv picks.
func interpreter() (string, error) {
	script, err := exec.LookPath("moto_server")
	if err != nil {
		return "", fmt.Errorf("moto_server not found on PATH (pip package moto[server])")
	}
	if out, err := exec.Command("pyenv", "which", "moto_server").Output(); err == nil {
		script = strings.TrimSpace(string(out))
	}
	f, err := os.Open(script)
	if err != nil {
		return "", err
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if python, ok := strings.CutPrefix(strings.TrimSpace(line), "#!"); ok && !strings.Contains(python, "bash") && !strings.Contains(python, "/sh") {
		return strings.Fields(python)[0], nil
	}
	return exec.LookPath("python3")
}
