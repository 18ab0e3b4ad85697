package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The kcoord binary is built once per test binary run, on first use, into
// a temporary directory RemoveBinary removes.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// KcoordBinary returns the path of ./cmd/kcoord of this module, built on
// the first call of the test binary (tests that run `kcoord serve`
// processes). A package that calls it removes the build in its TestMain,
// after m.Run, with RemoveBinary.
func KcoordBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "kcoord-test-bin-"); buildErr != nil {
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binPath = filepath.Join(binDir, "kcoord")
		cmd := exec.CommandContext(ctx, goTool, "build", "-o", binPath, "github.com/kcoord/kcoord/cmd/kcoord")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kcoord: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RemoveBinary removes what KcoordBinary built, if anything. Call it from
// TestMain once the tests ran.
func RemoveBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}
