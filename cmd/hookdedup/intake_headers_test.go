package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookdedup/hookdedup/storage"
)

// A delivery whose headers are over intake's limit (a provider's gateway adding a large
// tracing or cookie header) is refused by intake itself, not by the HTTP server: 431
// with a JSON {"error": …} that names the limit, and recorded as a rejection, as every
// refusal on /webhooks/{source} is.
func TestServe_HeadersOverLimitRefusedInJSON(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"`+"\n"+openSource, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.p.public.url(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprint(conn, "POST /webhooks/open HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Trace: "+
		strings.Repeat("a", 70<<10)+"\r\nContent-Length: 14\r\n\r\n{\"id\":\"big-1\"}")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	var a struct{ Error string }
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") != "application/json" ||
		json.Unmarshal(b, &a) != nil || !strings.Contains(a.Error, "headers are larger than the limit of 65536 bytes") {
		t.Fatalf("a delivery with 70 KiB of headers: %d %q %s; want 431 JSON naming the limit",
			resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var rejected []storage.Delivery
	err = s.p.db.EachDelivery(context.Background(), storage.DeliveryFilter{Source: "open"}, func(d storage.Delivery) error {
		rejected = append(rejected, d)
		return nil
	})
	if err != nil || len(rejected) != 1 || rejected[0].Outcome != storage.Rejected ||
		rejected[0].Status != http.StatusRequestHeaderFieldsTooLarge || rejected[0].Error != a.Error {
		t.Errorf("deliveries of the source after it: %+v, %v; want the one rejected 431 with its error", rejected, err)
	}
}

// Headers past twice intake's limit are refused by the HTTP server before they are all
// read, so that a connection cannot make serve hold a megabyte of them until
// read_header_timeout (net/http's own default bound).
func TestServe_HeadersFarOverLimitNotReadWhole(t *testing.T) {
	s := runServeInProcess(t, `addr = "127.0.0.1:0"`+"\n"+openSource, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.p.public.url(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	// Written apart from the reading: the server answers, and stops reading, long before
	// a megabyte has gone.
	go fmt.Fprint(conn, "POST /webhooks/open HTTP/1.1\r\nHost: x\r\nX-Trace: "+strings.Repeat("a", 1<<20)+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get("Content-Type") == "application/json" {
		t.Errorf("a request with 1 MiB of headers: %d %q; want net/http's own 431, the headers never read whole",
			resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
