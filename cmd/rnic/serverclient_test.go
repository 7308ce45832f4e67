package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runServerClient starts a test program's server, runs its client (cli
// makes a new command each try: retried while what it printed matches
// retry, the server not yet listening), waits for the server to end,
// and returns what each printed. Either failing fails t.
func runServerClient(t *testing.T, srv *exec.Cmd, cli func() *exec.Cmd, retry string) (cliOut, srvOut string) {
	t.Helper()
	cliOut, srvOut, err := serverClient(srv, cli, retry)
	if err != nil {
		t.Fatal(err)
	}
	return cliOut, srvOut
}

// serverClient is runServerClient returning the failure instead.
func serverClient(srv *exec.Cmd, cli func() *exec.Cmd, retry string) (cliOut, srvOut string, err error) {
	var so strings.Builder
	srv.Stdout, srv.Stderr = &so, &so
	if err := srv.Start(); err != nil {
		return "", "", err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	defer func() {
		srv.Process.Kill()
		<-done
	}()
	// stopped stops the server and returns what it printed: its output
	// is read only once its process has ended (exec copies it on a
	// goroutine of its own until then).
	stopped := func() string {
		srv.Process.Kill()
		err := <-done
		done <- err // for the deferred wait
		return so.String()
	}
	again := regexp.MustCompile(retry)
	var out []byte
	for try := 0; try < 60; try++ {
		out, err = cli().CombinedOutput()
		if err == nil || !again.Match(out) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	name := srv.Args[0]
	if err != nil {
		return string(out), "", fmt.Errorf("%s: %v\n%s\nserver:\n%s", strings.Join(cli().Args, " "), err, out, stopped())
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			return string(out), so.String(), fmt.Errorf("%s server: %v\n%s", name, err, so.String())
		}
	case <-time.After(20 * time.Second):
		return string(out), "", fmt.Errorf("%s's server did not end after its client:\n%s", name, stopped())
	}
	return string(out), so.String(), nil
}

// upNICs starts NICs with "rnic nic up", one command per group of
// addresses (the NICs of a group share a process), in a run directory
// of the test's own, and stops them when the test ends. It returns the
// run directory.
func upNICs(t *testing.T, groups ...[]string) string {
	t.Helper()
	run := t.TempDir()
	t.Setenv("RNIC_RUN_DIR", run)
	t.Setenv("RNIC_TEST_MAIN", "1")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir()) // the NICs' counters (rnic stat), this test's own
	t.Cleanup(func() { nicCmd(t, "down", "--all") })
	for _, as := range groups {
		args := []string{"up"}
		for _, a := range as {
			args = append(args, "--addr", a)
		}
		if out, err := nicCmd(t, args...); err != nil {
			t.Fatalf("nic %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return run
}
