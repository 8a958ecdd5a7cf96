// Package dynamotest runs moto_server, a local implementation of DynamoDB
// (moto, a Python package), for the tests of the DynamoDB store and of the
// functions that use it: one server per test binary (and one for each of
// the tests that load it most that run at once, see Exclusive), on a free
// loopback port, started when a test first needs it and stopped by its pid
// when the tests end.
package dynamotest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Moto is a running moto_server, behind a front of its own.
//
// Its Endpoint is the front's: a Proxy that injects nothing and answers a
// repeat of a TransactWriteItems by its ClientRequestToken, as DynamoDB
// does (the first call's answer once it succeeded, a
// TransactionInProgressException while it runs), where moto ignores the
// token and applies every repeat. The store repeats a write whose answer
// it lost; on a loaded machine an answer from moto is now and then lost
// (the SDK warned "response did not match expected checksum"), and the
// repeat, applied twice by moto alone, made a conformance test count one
// GCRA step twice (CI, 2026-12-02), an emulator's fault, not the store's.
type Moto struct {
	Endpoint string
	cmd      *exec.Cmd
	front    *httptest.Server
}

// serve is moto_server's main with one change: requests are served one at
// a time. moto_server serves each request on a thread of its own, and
// moto's DynamoDB applies two concurrent updates of one item without a
// lock, so increments get lost (TestKillNineBetweenWrites saw a count of 56
// after 57 decisions had returned). DynamoDB itself never does that: an item
// update is atomic and transactions are serializable, which one request at
// a time reproduces.
const serve = `import sys, werkzeug.serving, moto.server as m
app = m.DomainDispatcherApplication(m.create_backend_app)
werkzeug.serving.run_simple(sys.argv[1], int(sys.argv[2]), app, threaded=False)`

// Start starts moto's server on a free loopback port and waits until it
// answers. It runs the moto_server installed on this machine, through the
// Python interpreter its script names, serving one request at a time.
func Start() (*Moto, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server not found on PATH (pip package moto[server])")
	}
	python, err := interpreter(bin)
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop it and its children together
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &Moto{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(m.Endpoint + "/moto-api/"); err == nil {
			resp.Body.Close()
			if err := m.warm(); err != nil {
				m.Stop()
				return nil, err
			}
			p, front := newProxy(m.Endpoint)
			p.quiet = true
			m.Endpoint, m.front = front.URL, front
			return m, nil
		}
		if time.Now().After(deadline) {
			m.Stop()
			return nil, fmt.Errorf("moto_server did not answer on %s within 30 s", m.Endpoint)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// warm sends moto its first DynamoDB request, which makes it load its
// DynamoDB backend: seconds on a loaded machine, which a test's first
// decisions would otherwise wait out, past their busy timeout
// (TestTiersAtOneInstantAcrossHandles, nine clients at once on a server
// just started, saw "context deadline exceeded").
func (m *Moto) warm() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, Options()...)
	if err != nil {
		return err
	}
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(m.Endpoint) })
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		return fmt.Errorf("moto_server on %s: the first DynamoDB request: %w", m.Endpoint, err)
	}
	return nil
}

// interpreter finds the Python that runs moto_server: the one its script's
// first line names, or, behind a pyenv shim, the one pyenv would pick.
func interpreter(script string) (string, error) {
	out, err := exec.Command("pyenv", "which", "moto_server").Output()
	if err == nil {
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
	if python, err := exec.LookPath("python3"); err == nil {
		return python, nil
	}
	return "", fmt.Errorf("cannot tell which Python runs %s", script)
}

// Stop kills the server by its pid.
func (m *Moto) Stop() {
	syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	m.cmd.Wait()
	if m.front != nil {
		m.front.Close()
	}
}

// server is a moto_server started by the first test that asks for it.
type server struct {
	once sync.Once
	moto *Moto
	err  error
}

// endpoint starts s if no test has yet, and returns its endpoint. Without
// moto_server the test is skipped, loudly, unless RATELIMIT_REQUIRE_TOOLS
// is set (as .ci/run sets it), which makes that a failure.
func (s *server) endpoint(tb testing.TB) string {
	tb.Helper()
	s.once.Do(func() { s.moto, s.err = Start() })
	if s.err != nil {
		skipOrFail(tb, s.err)
	}
	return s.moto.Endpoint
}

func (s *server) stop() {
	if s.moto != nil {
		s.moto.Stop()
	}
}

var (
	// shared serves the tests that send a few requests at a time, side by
	// side.
	shared server
	// heavy are the servers of the tests that load moto with many clients,
	// one test on each at a time: moto serves one request at a time (see
	// serve), so two such tests on one server, or one beside the light
	// ones, only make each other's requests wait, past the stores' busy
	// timeouts. A test takes a free one or starts another, and gives it
	// back when it ends; there are as many as such tests ran at once.
	heavyMu   sync.Mutex
	heavyFree []*Moto
	heavyAll  []*Moto
)

// Main runs a test binary's tests with one moto_server for all of them,
// started by the first test that asks for it (Endpoint), so that a run of
// tests that need none starts none, and stopped when the tests end; and
// those of the tests that asked for a server of their own (Exclusive).
// Each test makes its own table (CreateTable), so tests can share a
// server, and run in parallel on it. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the servers that tests started; a TestMain that does
// more than Main calls it after m.Run.
func StopShared() {
	shared.stop()
	heavyMu.Lock()
	defer heavyMu.Unlock()
	for _, m := range heavyAll {
		m.Stop()
	}
}

// Endpoint is the shared server's endpoint, starting the server if no test
// has yet; TestMain must call Main or StopShared. Without moto_server the
// test is skipped, loudly, unless RATELIMIT_REQUIRE_TOOLS is set (as
// .ci/run sets it), which makes that a failure.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	return shared.endpoint(tb)
}

// Exclusive is Endpoint for a test that loads the server with many
// concurrent clients: a server it has to itself until it ends, while the
// tests on the shared one go on beside it. Servers are reused from test
// to test, and stopped by Main.
func Exclusive(tb testing.TB) string {
	tb.Helper()
	heavyMu.Lock()
	var m *Moto
	if n := len(heavyFree); n > 0 {
		m, heavyFree = heavyFree[n-1], heavyFree[:n-1]
	}
	heavyMu.Unlock()
	if m == nil {
		m = startOrSkip(tb)
		heavyMu.Lock()
		heavyAll = append(heavyAll, m)
		heavyMu.Unlock()
	}
	tb.Cleanup(func() {
		heavyMu.Lock()
		heavyFree = append(heavyFree, m)
		heavyMu.Unlock()
	})
	return m.Endpoint
}

// StartT starts a moto_server for one test and stops it when the test
// ends. Without moto_server the test is skipped, loudly, unless
// RATELIMIT_REQUIRE_TOOLS is set, which makes that a failure.
func StartT(tb testing.TB) *Moto {
	tb.Helper()
	m := startOrSkip(tb)
	tb.Cleanup(m.Stop)
	return m
}

// startOrSkip is Start, skipping the test without moto_server, or failing
// it with RATELIMIT_REQUIRE_TOOLS.
func startOrSkip(tb testing.TB) *Moto {
	tb.Helper()
	m, err := Start()
	if err != nil {
		skipOrFail(tb, err)
	}
	return m
}

// skipOrFail ends a test that moto_server could not be started for (err):
// skipped, loudly, or failed with RATELIMIT_REQUIRE_TOOLS.
func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	msg := "SKIPPED: the DynamoDB half did not run: " + err.Error()
	if os.Getenv("RATELIMIT_REQUIRE_TOOLS") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// Env is the environment a process needs to reach moto: static credentials
// and a region, as the SDK's default chain reads them.
var Env = []string{"AWS_ACCESS_KEY_ID=moto", "AWS_SECRET_ACCESS_KEY=moto", "AWS_REGION=us-east-1"}

// Options are the same for an SDK configuration in this process.
func Options() []func(*config.LoadOptions) error {
	return []func(*config.LoadOptions) error{
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("moto", "moto", "")),
	}
}

// Client is a DynamoDB client for endpoint.
func Client(tb testing.TB, endpoint string) *dynamodb.Client {
	tb.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), Options()...)
	if err != nil {
		tb.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// CreateTable creates a table shaped as template.yaml's, with a name of its
// own, and returns the name.
func CreateTable(tb testing.TB, endpoint string) string {
	tb.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := "ratelimit-" + strings.ToLower(hex.EncodeToString(b[:]))
	c := Client(tb, endpoint)
	ctx := context.Background()
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
	})
	// The name is new: if it is in use, the SDK retried this very request
	// after losing the answer to the first try (seen once in CI, with a
	// checksum warning from the SDK), and the table is ours.
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		tb.Fatalf("create table %s: %v", name, err)
	}
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires_at"), Enabled: aws.Bool(true)},
	}); err != nil {
		tb.Fatalf("enable TTL on %s: %v", name, err)
	}
	return name
}
