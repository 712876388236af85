// Spawn benchmark peer for `progeny bench spawn`: Go's os/exec.
//
// Runs its own timed loop in its own process (so it is timed by its own
// monotonic clock) and prints the raw figures for the harness to parse:
//
//	spawn_peer ITERATIONS BUDGET_SECONDS WARMUP MIN_ITERATIONS PROGRAM [ARGS...]
//
// Each iteration is exec.Command(PROGRAM, ARGS...).Run() with the same
// housekeeping as the harness's own methods: stdout goes to /dev/null (a nil
// Cmd.Stdout, which os/exec opens /dev/null for), stdin and stderr are the
// parent's (passed as *os.File, so no copying goroutines), and the
// environment is inherited. The loop stops after ITERATIONS measured runs, or
// once BUDGET_SECONDS have passed and MIN_ITERATIONS runs are measured.
//
// Output on success (stdout, exit 0):
//
//	samples_ns N N N ...
//	wall_ns N
//
// On failure: "error MESSAGE" on stdout and exit 1.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

func fail(format string, args ...any) {
	fmt.Printf("error "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 6 {
		fail("usage: spawn_peer ITERATIONS BUDGET_SECONDS WARMUP MIN_ITERATIONS PROGRAM [ARGS...]")
	}
	iterations, err1 := strconv.Atoi(os.Args[1])
	budgetSeconds, err2 := strconv.ParseFloat(os.Args[2], 64)
	warmup, err3 := strconv.Atoi(os.Args[3])
	minIterations, err4 := strconv.Atoi(os.Args[4])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		fail("bad numeric argument in %v", os.Args[1:5])
	}
	program, args := os.Args[5], os.Args[6:]
	budget := time.Duration(budgetSeconds * float64(time.Second))

	run := func() {
		cmd := exec.Command(program, args...)
		cmd.Stdin = os.Stdin
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fail("%s: %v", program, err)
		}
	}
	for i := 0; i < warmup; i++ {
		run()
	}

	samples := make([]int64, 0, iterations)
	start := time.Now()
	for len(samples) < iterations {
		before := time.Now()
		run()
		after := time.Now()
		samples = append(samples, after.Sub(before).Nanoseconds())
		if after.Sub(start) >= budget && len(samples) >= minIterations {
			break
		}
	}
	wall := time.Since(start)

	out := bufio.NewWriter(os.Stdout)
	fmt.Fprint(out, "samples_ns")
	for _, sample := range samples {
		fmt.Fprintf(out, " %d", sample)
	}
	fmt.Fprintf(out, "\nwall_ns %d\n", wall.Nanoseconds())
	out.Flush()
}
