package main

import (
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestStopReload_NoDefaultActionBetween: a SIGHUP that arrives while stopReload runs
// leaves the process running; between its stopping the reload channel and ignoring the
// signal, SIGHUP's default action would end it with status 129. The test runs itself
// again in a child that stops reload channels over and over while signalling itself.
func TestStopReload_NoDefaultActionBetween(t *testing.T) {
	if os.Getenv("HOOKDEDUP_TEST_STOP_RELOAD_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestStopReload_NoDefaultActionBetween$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "HOOKDEDUP_TEST_STOP_RELOAD_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("reload stopped while SIGHUP arrived: the process ended with %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "still running after every SIGHUP") {
			t.Fatalf("the child did not reach its end:\n%s", out)
		}
		return
	}

	// Taken before the first SIGHUP is sent: until then SIGHUP's default action is the
	// process's, whatever stopReload does.
	reload := make(chan os.Signal, 1)
	signal.Notify(reload, syscall.SIGHUP)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			syscall.Kill(os.Getpid(), syscall.SIGHUP)
		}
	})
	for range 20_000 {
		stopReload(reload)
		reload = make(chan os.Signal, 1)
		signal.Notify(reload, syscall.SIGHUP)
	}
	stopReload(reload)
	close(stop)
	wg.Wait()
	t.Log("still running after every SIGHUP")
}
