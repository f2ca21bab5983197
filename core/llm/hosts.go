package llm

import (
	"fmt"
	"net/netip"
	"strings"
)

// hostList is the set of hosts outbound requests may reach: exact names,
// "*.domain" suffixes and addresses (single or CIDR). It is checked twice:
// on the URL's host before any connection (allows), and on each address
// the name resolves to, when dialling (dialAllowed).
type hostList struct {
	names    map[string]bool
	suffixes []string       // ".example.com" for "*.example.com"
	addrs    []netip.Prefix // listed addresses, a single one as /32 or /128
	// loopback: the list names a loopback host ("localhost" or a loopback
	// address), so names may resolve to loopback addresses.
	loopback bool
	explicit bool // from network.allow_hosts, not implied by the configuration
}

// parseHostList reads allowlist entries. Implicit entries may be URLs (the
// configuration's base_url, evaluator.url...): their host is taken.
func parseHostList(entries []string, explicit bool) (*hostList, error) {
	h := &hostList{names: map[string]bool{}, explicit: explicit}
	for _, raw := range entries {
		e := strings.TrimSpace(raw)
		if !explicit && strings.Contains(e, "://") {
			host, err := urlHost(e)
			if err != nil {
				return nil, err
			}
			e = host
		}
		if !explicit {
			// A URL of the configuration naming a link-local or metadata
			// address does not list it (issue 26 §6): only an explicit
			// network.allow_hosts entry opens one, as for a name that
			// resolves to one.
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil && addressClass(a.Unmap().WithZone("")) == classLinkLocal {
				return nil, fmt.Errorf("%s names %s, a link-local or metadata address: Clara reaches one only when network.allow_hosts lists it", raw, a)
			}
		}
		if err := h.add(e); err != nil {
			return nil, fmt.Errorf("network.allow_hosts entry %q: %v", raw, err)
		}
	}
	return h, nil
}

func (h *hostList) add(e string) error {
	e = strings.TrimSuffix(strings.ToLower(e), ".")
	if e == "" {
		return fmt.Errorf("empty")
	}
	if p, err := netip.ParsePrefix(e); err == nil {
		h.addAddr(p.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
		a = a.Unmap().WithZone("")
		h.addAddr(netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if strings.Contains(e, "://") || strings.ContainsAny(e, "/:@ ") {
		return fmt.Errorf("give a host name, *.domain or an address (no scheme, port or path)")
	}
	if rest, ok := strings.CutPrefix(e, "*."); ok {
		if !validHostName(rest) {
			return fmt.Errorf("not a host name pattern")
		}
		h.suffixes = append(h.suffixes, "."+rest)
		return nil
	}
	if !validHostName(e) {
		return fmt.Errorf("not a host name")
	}
	h.names[e] = true
	if e == "localhost" {
		h.loopback = true
	}
	return nil
}

func (h *hostList) addAddr(p netip.Prefix) {
	h.addrs = append(h.addrs, p)
	if p.Addr().IsLoopback() {
		h.loopback = true
	}
}

// validHostName accepts letters, digits, '-', '_' and dots between labels.
func validHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allows reports whether a URL's host (as url.URL.Hostname gives it) is
// on the list: before any connection is made.
func (h *hostList) allows(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return h.listed(a.Unmap().WithZone(""))
	}
	if h.names[host] {
		return true
	}
	for _, s := range h.suffixes {
		if len(host) > len(s) && strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func (h *hostList) listed(a netip.Addr) bool {
	for _, p := range h.addrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// dialAllowed reports whether an address a name resolved to may be
// dialled: any address that is listed; otherwise any but the link-local
// and metadata addresses, and loopback only when the list names a
// loopback host.
func (h *hostList) dialAllowed(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	if h.listed(a) {
		return true
	}
	switch addressClass(a) {
	case classLoopback:
		return h.loopback
	case classLinkLocal:
		return false
	}
	return true
}

const (
	classOrdinary = iota
	classLoopback
	classLinkLocal
)

// Cloud metadata services outside 169.254.0.0/16: AWS's IPv6 endpoint,
// Alibaba Cloud's, and Azure's wire server.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("168.63.129.16"),
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")      // 0.0.0.0 dials the local host on Linux
	nat64       = netip.MustParsePrefix("64:ff9b::/96")   // an IPv4 address behind a NAT64 gateway
	ipv4Compat  = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible IPv6
	linkLocal4  = netip.MustParsePrefix("169.254.0.0/16") // also covered by IsLinkLocalUnicast
)

// addressClass sorts an address into what the dial check treats alike.
func addressClass(a netip.Addr) int {
	a = a.Unmap()
	if a.Is6() && (nat64.Contains(a) || ipv4Compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback()) {
		b := a.As16()
		return addressClass(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	switch {
	case a.IsLoopback() || a.IsUnspecified() || thisNetwork.Contains(a):
		return classLoopback
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || linkLocal4.Contains(a):
		return classLinkLocal
	}
	for _, m := range metadataAddrs {
		if a == m {
			return classLinkLocal
		}
	}
	return classOrdinary
}
