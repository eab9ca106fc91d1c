package harness

import (
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A process that keeps every CPU busy on several threads: the case where
// SIGSTOP takes effect thread by thread.
func TestFreezeHelperProcess(t *testing.T) {
	if os.Getenv("HARNESS_FREEZE_HELPER") != "1" {
		t.Skip("helper process for TestFreeze")
	}
	var n atomic.Int64
	for range 4 * runtime.NumCPU() {
		go func() {
			for {
				n.Add(1)
			}
		}()
	}
	for {
		time.Sleep(time.Millisecond)
		os.Stdout.Write([]byte{'.'})
	}
}

func TestFreeze(t *testing.T) {
	for i := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFreezeHelperProcess$")
		cmd.Env = append(os.Environ(), "HARNESS_FREEZE_HELPER=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stop := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }
		if _, err := out.Read(make([]byte, 1)); err != nil { // it runs
			stop()
			t.Fatal(err)
		}

		if err := freeze(cmd.Process.Pid); err != nil {
			stop()
			t.Fatal(err)
		}
		running, err := runningThreads(cmd.Process.Pid)
		if err != nil || len(running) > 0 {
			stop()
			t.Fatalf("round %d: freeze returned with threads %v running (%v)", i, running, err)
		}
		if err := thaw(cmd.Process.Pid); err != nil {
			stop()
			t.Fatal(err)
		}
		stop()
	}
	if running, err := runningThreads(1 << 30); err != nil || running != nil {
		t.Errorf("a process that is gone: %v, %v; want none running", running, err)
	}
}
