package procgroup_test

import (
	"bufio"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/procgroup"
)

// TestKillLeavesNothingOfTheGroup: Kill ends the leader and the child it
// started; SIGTERM and Stopped end a run that stops when asked.
func TestKillLeavesNothingOfTheGroup(t *testing.T) {
	t.Parallel()
	var p procgroup.Process
	cmd := exec.Command("sh", "-c", "sleep 600 & echo $!; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(cmd); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(exec.Command("true")); err == nil {
		t.Fatal("a second Start of a running process succeeded")
	}
	if !p.Kill() || p.Running() {
		t.Fatal("Kill did not end the run")
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the child %d outlived Kill: %v", child, err)
	}
	if p.Kill() {
		t.Fatal("Kill of a process that is not running reported a run")
	}

	if err := p.Start(exec.Command("sleep", "600")); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.Stopped(time.Minute) || p.Running() {
		t.Fatal("a run did not stop on SIGTERM")
	}
}
