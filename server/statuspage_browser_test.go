package server

import (
	"bytes"
	"context"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// screenshotDirEnv names the directory the browser test keeps its
// screenshots in; without it they go to the system's temporary directory.
const screenshotDirEnv = "KCOORD_SCREENSHOT_DIR"

// chromium finds Debian's headless-capable Chromium (.ci/run installs the
// "chromium" package when it is missing).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on this machine (apt-get install chromium; .ci/run does): the status page's browser test is skipped")
	return ""
}

// headless runs Chromium on url with args and returns its output.
func headless(t *testing.T, browser, pageURL string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	profile := t.TempDir()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--disable-extensions", "--user-data-dir=" + profile, "--virtual-time-budget=3000"}
	cmd := exec.CommandContext(ctx, browser, append(append(base, args...), pageURL)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// The status page, loaded in a real browser, shows what a person opens it
// for: every node alive with its shards, the groups with state and
// members, the group's members with their partitions and its committed
// offsets, and the recent rebalances. A screenshot of each page is kept.
func TestStatusPageInABrowser(t *testing.T) {
	browser := chromium(t)
	f := startStatusFixture(t)
	web := f.web[2] // a node that may coordinate none of the groups

	wants := []string{
		"Nodes", "Consumer groups", "Recent rebalances and leadership changes", "Shards",
		`href="/group?id=billing"`, "billing", "reports", "Stable", "Empty", "consumer / ",
		"became the leader of shard", `group "billing" stable at generation`,
	}
	// A loaded machine (CI runs every package at once) can make a shard
	// elect while the page is rendered, and the page then says so, as it
	// must; the checks below are of a settled cluster's page, so the page
	// is read again until the cluster has settled (or 30 s have passed).
	var dom string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		dom = string(headless(t, browser, web.URL+"/", "--dump-dom"))
		settled := !strings.Contains(dom, `class="banner`)
		for _, want := range wants {
			settled = settled && strings.Contains(dom, want)
		}
		if settled || time.Now().After(deadline) {
			break
		}
		t.Log("the cluster page shows a cluster that has not settled; reading it again")
	}
	for _, want := range wants {
		if !strings.Contains(dom, want) {
			t.Errorf("the cluster page does not show %q", want)
		}
	}
	if n := strings.Count(dom, `class="node"`); n != 3 {
		t.Errorf("the cluster page lists %d nodes, want 3", n)
	}
	if n := strings.Count(dom, `<span class="badge ok">alive</span>`); n != 3 {
		t.Errorf("the cluster page shows %d nodes alive, want 3", n)
	}
	if strings.Contains(dom, `class="banner`) {
		t.Errorf("a healthy cluster's page shows a warning banner:\n%s", dom)
	}

	group := string(headless(t, browser, web.URL+"/group?id=billing", "--dump-dom"))
	for _, want := range []string{"Consumer group", "<dt>Members</dt><dd>2</dd>", "billing-1", "billing-2", "leader", "Members and assignments", "Committed offsets", "orders", ">105<"} {
		if !strings.Contains(group, want) {
			t.Errorf("billing's page does not show %q", want)
		}
	}
	if n := strings.Count(group, `class="member"`); n != 2 {
		t.Errorf("billing's page lists %d members, want 2", n)
	}
	if n := strings.Count(group, `class="offset"`); n != 6 {
		t.Errorf("billing's page lists %d committed offsets, want 6", n)
	}
	odd := string(headless(t, browser, web.URL+"/group?id="+url.QueryEscape(oddGroup), "--dump-dom"))
	if !strings.Contains(odd, "Committed offsets") || strings.Count(odd, `class="offset"`) != 1 {
		t.Errorf("the page of %q (not UTF-8) does not show its one offset", oddGroup)
	}

	dir := os.Getenv(screenshotDirEnv)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "kcoord-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"status-page.png": "/", "status-page-group.png": "/group?id=billing"} {
		file := filepath.Join(dir, name)
		headless(t, browser, web.URL+path, "--screenshot="+file, "--window-size=1400,1500", "--hide-scrollbars")
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("screenshot of %s: %v", path, err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil || img.Bounds().Dx() != 1400 {
			t.Fatalf("screenshot of %s: %v, bounds %v", path, err, img)
		}
		t.Logf("screenshot of %s kept at %s", path, file)
	}
}
