package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"
)

// scrapeFlag makes the runner a scraper: `runner -scrape URL` GETs URL once a second over
// one kept-alive connection, as a Prometheus server does, until SIGTERM, then prints a
// scrapeSummary as JSON. The runner starts it pinned to the load CPUs, so that scraping
// costs the gateway's CPUs only what the gateway itself does for a scrape.
const scrapeFlag = "-scrape"

type scrapeSummary struct {
	Scrapes  int     `json:"scrapes"`
	MedianMS float64 `json:"median_ms"`
	MaxMS    float64 `json:"max_ms"`
	Failed   int     `json:"failed"`
}

func runScraper(url string) error {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	client := &http.Client{Timeout: 5 * time.Second}
	var took []float64
	var sum scrapeSummary
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		start := time.Now()
		resp, err := client.Get(url)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		if err != nil {
			sum.Failed++
			fmt.Fprintln(os.Stderr, "scrape:", err)
		} else {
			took = append(took, float64(time.Since(start).Microseconds())/1000)
		}
		select {
		case <-stop:
			sum.Scrapes = len(took)
			if len(took) > 0 {
				slices.Sort(took)
				sum.MedianMS, sum.MaxMS = took[len(took)/2], took[len(took)-1]
			}
			return json.NewEncoder(os.Stdout).Encode(sum)
		case <-tick.C:
		}
	}
}

// scraper is a running `runner -scrape` process.
type scraper struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startScraper(cpus, url string) (*scraper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &scraper{cmd: pinned(cpus, self, scrapeFlag, url)}
	s.cmd.Stdout, s.cmd.Stderr = &s.out, os.Stderr
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// stop ends the scraper and returns what it measured; a failed scrape is an error, since
// the scenario would then not be what it claims.
func (s *scraper) stop() (scrapeSummary, error) {
	var sum scrapeSummary
	// taskset execs the runner, so the signal reaches the scraper itself.
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		return sum, err
	}
	if err := json.Unmarshal(s.out.Bytes(), &sum); err != nil {
		return sum, fmt.Errorf("reading its summary %q: %w", s.out.String(), err)
	}
	if sum.Failed > 0 {
		return sum, fmt.Errorf("%d of %d scrapes failed", sum.Failed, sum.Failed+sum.Scrapes)
	}
	return sum, nil
}
