// Package consoletest drives the console (pkg/console) in a real headless
// chromium from Go tests, through chromedp: start the browser, open a
// console page, wait for it to render, read its rows and timeline, collect
// console errors and exceptions, search the DOM for a canary, and write
// screenshots. Tests that use it skip when chromium is absent, unless CI is
// set: then a missing chromium fails the test.
package consoletest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ViewportWidth and ViewportHeight are the browser's viewport, and so the
// screenshots' size.
const (
	ViewportWidth  = 1280
	ViewportHeight = 800
)

// ScreenshotDirEnv names a directory that also receives each screenshot
// (make screenshots sets it to docs/images).
const ScreenshotDirEnv = "LANCEMASTER_SCREENSHOT_DIR"

// stepTimeout bounds every single step (a navigation, a wait, a click).
const stepTimeout = 15 * time.Second

// chromiumPaths are where Chromium looks before the PATH.
var chromiumPaths = []string{"/usr/bin/chromium"}

// Chromium returns the chromium binary to use: $LANCEMASTER_CHROMIUM, else
// /usr/bin/chromium, else chromium on the PATH. Without one it skips the
// test, or fails it when the environment variable CI is set.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := Find(); p != "" {
		return p
	}
	msg := "no chromium: the console's browser tests need Debian's chromium at /usr/bin/chromium (apt-get install chromium) or $LANCEMASTER_CHROMIUM"
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal(msg + " (CI is set, so this fails rather than skips)")
		return ""
	}
	t.Skip(msg)
	return ""
}

// Find returns the chromium binary to use ($LANCEMASTER_CHROMIUM, else
// /usr/bin/chromium, else chromium on the PATH), or "".
func Find() string {
	candidates := append([]string{os.Getenv("LANCEMASTER_CHROMIUM")}, chromiumPaths...)
	if p, err := exec.LookPath("chromium"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if st, err := os.Stat(c); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}

// AllocatorOptions start chromium bin headless with the profile dir
// userDataDir, loopback only (every host name but 127.0.0.1 and localhost
// fails to resolve; no proxy, no background or component traffic), the
// viewport's window size, and its output to out.
func AllocatorOptions(bin, userDataDir string, out io.Writer) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(ViewportWidth, ViewportHeight),
		chromedp.CombinedOutput(out),
	}
}

// RenderedJS is true once the console's page for the hash route has
// finished a render (main#app data-state "ready" or "error", at least one
// render).
func RenderedJS(hash string) string {
	return `(() => { const a = document.getElementById("app");
		return !!a && a.dataset.route === ` + strconv.Quote(hash) + ` && (a.dataset.state === "ready" || a.dataset.state === "error") && Number(a.dataset.renders) > 0; })()`
}

// Browser is one headless chromium with one tab.
type Browser struct {
	t      testing.TB
	ctx    context.Context
	base   string
	output string // chromium's stdout and stderr, a file

	mu       sync.Mutex
	problems []string
	shots    int
}

// New starts chromium headless with a fresh profile, loopback only (every
// host name but 127.0.0.1 and localhost fails to resolve; no proxy, no
// background or component traffic), and a 1280x800 viewport. base is the
// server's root URL (http://127.0.0.1:PORT). The browser stops when the
// test ends.
func New(t testing.TB, base string) *Browser {
	t.Helper()
	bin := Chromium(t)
	b := &Browser{t: t, base: strings.TrimSuffix(base, "/"), output: filepath.Join(t.TempDir(), "chromium.log")}
	out, err := os.Create(b.output)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	opts := AllocatorOptions(bin, t.TempDir(), out)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b.ctx = ctx
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser: no timeout on its context (that
	// would stop the browser), so a watchdog bounds it instead.
	started := make(chan error, 1)
	go func() {
		started <- chromedp.Do(ctx, chromedp.EmulateViewport(ViewportWidth, ViewportHeight))
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium %s: %v\n%s", bin, err, b.chromiumOutput())
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("chromium %s did not start within 30s\n%s", bin, b.chromiumOutput())
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// chromiumOutput is the end of what chromium printed.
func (b *Browser) chromiumOutput() string {
	data, _ := os.ReadFile(b.output)
	return string(data[max(0, len(data)-8192):])
}

// Do runs steps in the tab, bounded by stepTimeout, and fails the test on an
// error.
func (b *Browser) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v%s", what, err, b.problemText())
	}
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// into T.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v%s", expr, err, b.problemText())
	}
	return v
}

// WaitFor polls a JavaScript condition until it is true, for at most
// stepTimeout.
func (b *Browser) WaitFor(what, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(20*time.Millisecond),
		chromedp.WithPollingTimeout(stepTimeout-time.Second))); err != nil {
		state := ""
		if s, err := chromedp.Run(context.WithoutCancel(b.ctx), chromedp.Evaluate[string](`location.hash + " " + JSON.stringify(document.getElementById("app") && document.getElementById("app").dataset) + " " + (document.getElementById("banners") || {}).textContent`)); err == nil {
			state = "\npage: " + s
		}
		b.t.Fatalf("waiting for %s (%s): %v%s%s", what, cond, err, state, b.problemText())
	}
}

// Open loads the console at /ui/ with the given hash route (e.g. "#/jobs")
// and waits until that page has rendered an answer. query, when not empty,
// is the page's query string (e.g. "refresh_ms=200").
func (b *Browser) Open(query, hash string) {
	b.t.Helper()
	u := b.base + "/ui/"
	if query != "" {
		u += "?" + query
	}
	b.Do("open "+u+hash, chromedp.Navigate(u+hash))
	b.WaitRendered(hash)
}

// Go moves to another hash route in the loaded console and waits until it
// has rendered.
func (b *Browser) Go(hash string) {
	b.t.Helper()
	b.Do("go to "+hash, chromedp.Evaluate[chromedp.Void]("location.hash = "+strconv.Quote(hash)))
	b.WaitRendered(hash)
}

// Click clicks the element a CSS selector names, with the mouse.
func (b *Browser) Click(css string) {
	b.t.Helper()
	b.Do("click "+css, chromedp.Click(chromedp.CSS(css)))
}

// WaitRendered waits until the page of route hash has finished a render
// (main#app data-state "ready" or "error", at least one render).
func (b *Browser) WaitRendered(hash string) {
	b.t.Helper()
	b.WaitFor("the page "+hash+" to render", RenderedJS(hash))
}

// Route is the current hash route the console rendered.
func (b *Browser) Route() string {
	return Eval[string](b, `document.getElementById("app").dataset.route || ""`)
}

// JobRow is one row of the jobs table, as the page shows it.
type JobRow struct {
	ID         int64             `json:"id"`
	State      string            `json:"state"`
	Unresolved bool              `json:"unresolved"`
	Classes    string            `json:"classes"`
	Cols       map[string]string `json:"cols"`
}

// JobRows reads the jobs table, top to bottom.
func (b *Browser) JobRows() []JobRow {
	b.t.Helper()
	return Eval[[]JobRow](b, `[...document.querySelectorAll("#jobs tbody tr")].map((tr) => ({
		id: Number(tr.dataset.jobId), state: tr.dataset.state, unresolved: tr.dataset.unresolved === "true", classes: tr.className,
		cols: Object.fromEntries([...tr.querySelectorAll("td[data-col]")].map((td) => [td.dataset.col, td.textContent.trim()])) }))`)
}

// Event is one step of a job page's timeline, as the page shows it.
type Event struct {
	Kind  string `json:"kind"`
	Index int64  `json:"index"`
	Text  string `json:"text"`
}

// Timeline reads the job page's timeline, top to bottom.
func (b *Browser) Timeline() []Event {
	b.t.Helper()
	return Eval[[]Event](b, `[...document.querySelectorAll("#timeline li")].map((li) => ({
		kind: li.dataset.kind, index: Number(li.dataset.index), text: li.textContent }))`)
}

// Banners are the texts of the visible banners (stale answer, no leader,
// errors, UNKNOWN jobs).
func (b *Browser) Banners() map[string]string {
	b.t.Helper()
	return Eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("[data-banner]")].map((e) => [e.dataset.banner, e.textContent]))`)
}

// Everything is all the page holds that a person or a script could read:
// the serialized DOM, the rendered text, form values, the title, the URL
// and the web storage.
func (b *Browser) Everything() string {
	b.t.Helper()
	return Eval[string](b, `[document.documentElement.outerHTML, document.body.innerText, document.title, location.href,
		[...document.querySelectorAll("input, select, textarea")].map((e) => e.value).join("\n"),
		JSON.stringify(Object.entries(sessionStorage)), JSON.stringify(Object.entries(localStorage))].join("\n")`)
}

// Problems are the console errors and uncaught exceptions seen so far.
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// NoProblems fails the test when the page logged a console error or threw.
func (b *Browser) NoProblems(where string) {
	b.t.Helper()
	if p := b.Problems(); len(p) > 0 {
		b.t.Errorf("%s: the console logged errors or exceptions:\n  %s", where, strings.Join(p, "\n  "))
	}
}

// ExpectProblem removes the console errors that contain text (one the
// test caused on purpose, such as the browser's line for a 404 answer) and
// fails the test when there is none.
func (b *Browser) ExpectProblem(text string) {
	b.t.Helper()
	// The browser's log line travels apart from the page: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.ContainsFunc(b.Problems(), func(p string) bool { return strings.Contains(p, text) }) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.problems[:0]
	found := false
	for _, p := range b.problems {
		if strings.Contains(p, text) {
			found = true
			continue
		}
		kept = append(kept, p)
	}
	b.problems = kept
	if !found {
		b.t.Errorf("expected a console error with %q; got %q", text, b.problems)
	}
}

func (b *Browser) problemText() string {
	if p := b.Problems(); len(p) > 0 {
		return "\nconsole errors:\n  " + strings.Join(p, "\n  ")
	}
	return ""
}

// Screenshot writes the viewport as name.png under the test's temp dir and,
// when $LANCEMASTER_SCREENSHOT_DIR is set, there too; it returns the temp
// dir's path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	return b.screenshot(name, chromedp.CaptureScreenshot())
}

// FullScreenshot is Screenshot of the whole page, however long.
func (b *Browser) FullScreenshot(name string) string {
	b.t.Helper()
	return b.screenshot(name, chromedp.FullScreenshot(100))
}

func (b *Browser) screenshot(name string, shot chromedp.Action[[]byte]) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.mu.Lock()
	b.shots++
	b.mu.Unlock()
	p := filepath.Join(b.t.TempDir(), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if dir := os.Getenv(ScreenshotDirEnv); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	return p
}
