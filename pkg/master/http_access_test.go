package master

import (
	"testing"

	"github.com/lancemaster/lancemaster/pkg/httpapi"
	"github.com/lancemaster/lancemaster/pkg/rpc"
)

// Without TLS the API answers on a loopback listener; elsewhere only when
// http_api_plaintext opts in, with the RPC server's warning.
func TestHTTPAccessWithoutTLS(t *testing.T) {
	for _, c := range []struct {
		addr      string
		plaintext bool
		want      httpapi.Access
		warns     bool
	}{
		{"127.0.0.1:0", false, httpapi.Access{Plaintext: true}, false},
		{"[::1]:9100", false, httpapi.Access{Plaintext: true}, false},
		{"localhost:9100", false, httpapi.Access{Plaintext: true}, false},
		{"0.0.0.0:9100", false, httpapi.Access{}, false},
		{":9100", false, httpapi.Access{}, false},
		{"10.0.0.5:9100", false, httpapi.Access{}, false},
		{"10.0.0.5:9100", true, httpapi.Access{Plaintext: true}, true},
		{":9100", true, httpapi.Access{Plaintext: true}, true},
	} {
		got, warn := httpAccess(c.addr, c.plaintext, nil)
		if got != c.want || warn != c.warns {
			t.Errorf("%s plaintext=%v: %+v warn=%v; want %+v warn=%v", c.addr, c.plaintext, got, warn, c.want, c.warns)
		}
	}
	if got, warn := httpAccess("0.0.0.0:9100", true, &rpc.Certs{}); got != (httpapi.Access{TLS: true}) || warn {
		t.Errorf("with certificates: %+v warn=%v", got, warn)
	}
}
