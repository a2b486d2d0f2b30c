package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// clearScreen moves the cursor home and clears a terminal (ANSI), to redraw in place.
const clearScreen = "\x1b[H\x1b[2J"

// runWatch is release status --watch: it reads the health every interval and prints the
// status whenever it differs from the last one printed, until ctx ends (Ctrl-C), which is
// a success. On a terminal it redraws the screen; elsewhere (a pipe, a CI log) it appends
// the new status after a line with the time. A failed read is printed once per distinct
// error and retried; it does not end the watch.
//
// /health has no watch verb, so this polls; nothing is printed while nothing changes.
func runWatch(ctx context.Context, env *cliEnv, fetch healthFetch, interval time.Duration) error {
	redraw := isTerminal(env.stdout)
	var shown []byte
	var lastErr string
	_ = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		h, err := fetch(ctx)
		if err != nil {
			if ctx.Err() == nil && err.Error() != lastErr {
				fmt.Fprintf(env.stderr, "%s: %s (retrying)\n", env.name, sanitizeLines(err.Error()))
				lastErr = err.Error()
			}
			return false, nil
		}
		lastErr = ""
		var b bytes.Buffer
		if err := printReleaseStatus(&b, h); err != nil {
			return false, err
		}
		if bytes.Equal(b.Bytes(), shown) {
			return false, nil
		}
		switch {
		case redraw:
			fmt.Fprint(env.stdout, clearScreen)
		case shown != nil:
			fmt.Fprintln(env.stdout)
		}
		fmt.Fprintf(env.stdout, "%s\n", env.now().UTC().Format(time.RFC3339))
		_, _ = env.stdout.Write(b.Bytes())
		shown = b.Bytes()
		return false, nil
	})
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
