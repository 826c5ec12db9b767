package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ffpf-go/ffpf/flowspaces"
	"github.com/ffpf-go/ffpf/flowspaces/hierarchy"
	"github.com/ffpf-go/ffpf/functions"
)

// The web page in headless Chromium (Debian's chromium), driven with
// chromedp: a novice's way through it, by clicks and typing.

const webToken = "t0ken-for-the-test"

// browser returns a chromedp context on a fresh headless Chromium, with
// the flags this machine kind needs. Chromium is installed as
// scripts/deps.sh installs packages (as root, with apt); without it the
// test fails under CI=true, and skips elsewhere.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil && os.Geteuid() == 0 {
		if out, err := exec.Command("../../scripts/deps.sh", "chromium").CombinedOutput(); err != nil {
			t.Logf("installing chromium: %v: %s", err, out)
		}
		path, err = exec.LookPath("chromium")
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot test the web page: no chromium (Debian's package; scripts/deps.sh chromium installs it as root): %v", err)
		}
		t.Skip("needs chromium (scripts/deps.sh chromium)")
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 1000))
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

// compose opens the page and composes, by clicks and typing, a bpf
// function with filter, then a pktcount after it.
func compose(ctx context.Context, d *Daemon, filter string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate("http://"+d.HTTPAddr()+"/"),
		chromedp.WaitVisible(css(`body[data-ready="1"]`)),
		chromedp.SendKeys(css("#token"), webToken),
		chromedp.Click(css(`#palette button[data-class="bpf"]`)),
		chromedp.WaitVisible(css(`.fn[data-fn="bpf"] input[name="expr"]`)),
		chromedp.SendKeys(css(`.fn[data-fn="bpf"] input[name="expr"]`), filter),
		chromedp.Click(css(`#palette button[data-class="pktcount"]`)),
	)
}

// css is a CSS selector (a plain string would be a DOM search).
func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// text is the text of the element sel selects.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
	if err != nil {
		t.Fatalf("%s: %v", sel, err)
	}
	return s
}

// poll waits until the JavaScript predicate holds.
func poll(t *testing.T, ctx context.Context, pred string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](pred)); err != nil {
		t.Fatalf("waiting for %s: %v", pred, err)
	}
}

// TestPageComposeSubmitWatch: a request composed by clicks and typing is
// shown as the expression it is, checked, placed, submitted, and its
// counter moves on generated traffic. The screenshot is saved
// ($FFPF_SCREENSHOT names where, else the test's directory).
func TestPageComposeSubmitWatch(t *testing.T) {
	ctx := browser(t)
	// The machine's hierarchy, for the placement to be drawn in (the
	// generator, and so all, runs in userspace: nothing is attached).
	d := startDaemon(t, Config{HTTP: "127.0.0.1:0", Token: webToken, Hierarchy: func() (flowspaces.Flowspace, error) {
		root, _ := hierarchy.Discover(functions.Default)
		return root, nil
	}})
	if err := compose(ctx, d, "tcp"); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.getElementById("check-status").textContent.includes("> (pktcount)")`)
	expr, status := text(t, ctx, "#expr"), text(t, ctx, "#check-status")
	poll(t, ctx, `document.querySelector("#placement .placed") !== null`)
	placed := text(t, ctx, "#placement")
	if expr != `(bpf,"tcp") > (pktcount)` {
		t.Errorf("the page shows the expression %q", expr)
	}
	if !strings.Contains(status, "(bpf,expr=tcp) > (pktcount)") || !strings.Contains(placed, "user") || !strings.Contains(placed, "bpf#") {
		t.Errorf("check says %q, placement %q", status, placed)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(css("#name"), "novice"),
		chromedp.Click(css("#submit:not([disabled])")),
		chromedp.WaitVisible(css(`tr[data-fn^="pktcount"] td[data-k="in"]`)),
	); err != nil {
		t.Fatal(err)
	}
	counter := func() int {
		t.Helper()
		n, _ := strconv.Atoi(strings.TrimSpace(text(t, ctx, `tr[data-fn^="pktcount"] td[data-k="in"]`)))
		return n
	}
	first := 0
	deadline := time.Now().Add(30 * time.Second)
	for first = counter(); first == 0; first = counter() {
		if time.Now().After(deadline) {
			t.Fatal("the counter stays at 0")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for n := counter(); n <= first; n = counter() {
		if time.Now().After(deadline) {
			t.Fatalf("the counter does not move: %d", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	l := d.list(&identity{group: webGroup})
	if len(l.Requests) != 1 || l.Requests[0].Name != "novice" || l.Requests[0].Canonical != "(bpf,expr=tcp) > (pktcount)" {
		t.Fatalf("the daemon holds %+v", l.Requests)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("FFPF_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "page.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	// Removed from the page, the generator stops.
	if err := chromedp.Do(ctx, chromedp.Click(css(`.req button`)), chromedp.WaitNotPresent(css(`.req`))); err != nil {
		t.Fatal(err)
	}
	if n := len(d.rt.Functions()); n != 0 {
		t.Errorf("%d functions left after the page removed the request", n)
	}
}

// TestPageShowsFilterError: a filter libpcap refuses is shown as the
// check's error, with the caret under it, and cannot be submitted; without
// the token nothing can be submitted at all.
func TestPageShowsFilterError(t *testing.T) {
	ctx := browser(t)
	d := startDaemon(t, Config{HTTP: "127.0.0.1:0", Token: webToken})
	if err := compose(ctx, d, "tcp and bogus"); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.getElementById("expr").textContent.endsWith("(pktcount)") && document.getElementById("check-error").textContent.includes("bogus")`)
	msg, status := text(t, ctx, "#check-error"), text(t, ctx, "#check-status")
	disabled, err := chromedp.Run(ctx, chromedp.JavascriptAttribute[bool](css("#submit"), "disabled"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "bogus") || !strings.Contains(msg, "^") || !strings.Contains(status, "not valid") || !disabled {
		t.Errorf("error shown %q, status %q, submit disabled %v", msg, status, disabled)
	}
	// Corrected, it checks; without the token, it is refused.
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('.fn[data-fn="bpf"] input[name="expr"]').value = ""`),
		chromedp.SendKeys(css(`.fn[data-fn="bpf"] input[name="expr"]`), "udp"),
		chromedp.WaitVisible(css(`#check-status.ok`)),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("token").value = ""`),
		chromedp.WaitVisible(css(`#submit:not([disabled])`)),
		// The error's box has just gone, and the button moved up with the
		// layout: clicked where it is now, not where a mouse would aim.
		chromedp.Evaluate[chromedp.Void](`document.getElementById("submit").click()`),
	); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.getElementById("submit-status").textContent.startsWith("refused")`)
	said := text(t, ctx, "#submit-status")
	if !strings.Contains(said, "token") || len(d.rt.Functions()) != 0 {
		t.Errorf("submitting without the token: %q, %d functions", said, len(d.rt.Functions()))
	}
}
