package llm

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A Transport checks the allowlist it was prepared with until Commit, then
// the Client's; every answer is capped.
func TestTransport_allowlistAndCaps(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Length", "5000")
			io.WriteString(w, strings.Repeat("a", 5000))
		case "/chunked":
			for i := 0; i < 10; i++ {
				io.WriteString(w, strings.Repeat("a", 1000))
				w.(http.Flusher).Flush()
			}
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 0; i < 100; i++ { // 100 small events: 10 KB in all
				io.WriteString(w, "data: "+strings.Repeat("e", 90)+"\n\n")
			}
			io.WriteString(w, "data: "+strings.Repeat("e", 70000)+"\n\n") // one past the cap and its slack
		default:
			io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	c := newTestClient(t, ClientOptions{AllowHosts: []string{"api.example.com"}})
	tr, err := c.NewTransport(ClientOptions{AllowHosts: []string{"127.0.0.1"}, MaxResponseBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	hc := tr.HTTPClient()
	get := func(path string) (string, error) {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("/"); err != nil || body != "ok" {
		t.Fatalf("prepared: %q %v", body, err)
	}
	if _, err := get("/big"); err == nil || !strings.Contains(err.Error(), "the answer is 5000 bytes, more than llm.max_response_bytes (4096)") {
		t.Errorf("big: %v", err)
	}
	if body, err := get("/chunked"); !errors.Is(err, errTooLarge) || len(body) > 4096 ||
		!strings.Contains(err.Error(), "the answer is larger than llm.max_response_bytes (4096)") {
		t.Errorf("chunked: %d bytes, %v", len(body), err)
	}
	if body, err := get("/events"); !errors.Is(err, errTooLarge) || len(body) < 9000 ||
		!strings.Contains(err.Error(), "an event of the stream is larger than llm.max_response_bytes (4096)") {
		t.Errorf("events: %d bytes, %v", len(body), err)
	}
	if tr.MaxResponseBytes() != 4096 {
		t.Errorf("MaxResponseBytes %d", tr.MaxResponseBytes())
	}
	tr.Commit()
	if _, err := get("/"); err == nil || !strings.Contains(err.Error(), `host "127.0.0.1" is not in network.allow_hosts`) {
		t.Errorf("committed: %v", err)
	}
	if err := c.CheckHost(srv.URL); err == nil || err.Error() != `host "127.0.0.1" is not in network.allow_hosts` {
		t.Errorf("CheckHost: %v", err)
	}
	if err := c.CheckHost("https://api.example.com/mcp"); err != nil {
		t.Errorf("CheckHost: %v", err)
	}
}
