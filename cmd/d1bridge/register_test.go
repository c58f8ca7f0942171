package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/adapter/xsdtest"
	"github.com/d1bridge/d1bridge/auth"
)

// registerServerCert writes a server certificate for 127.0.0.1 signed by ca
// and its key; it answers their paths and the certificate.
func registerServerCert(t *testing.T, dir string, ca *authCA) (certFile, keyFile string, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der := ca.sign(t, &x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, &key.PublicKey)
	certFile, keyFile = registerWriteCert(t, dir, "server", tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	return certFile, keyFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// registerWriteCert writes c (an ECDSA certificate) as name.crt and name.key.
func registerWriteCert(t *testing.T, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return authWrite(t, dir, name+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})),
		authWrite(t, dir, name+".key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
}

// fakeCN is a coordinating node's CNRegister, as DataONE's CN serves it:
// the caller's client certificate is its credential and must be one of the
// subjects of the node document it sends; getNodeCapabilities answers the
// registered document or NotFound. Each document received is checked
// against the DataONE schema.
type fakeCN struct {
	t     *testing.T
	mu    sync.Mutex
	nodes map[string]*adapter.Node
	calls []string // "POST urn:node:x", "PUT urn:node:x"
}

func (f *fakeCN) fail(w http.ResponseWriter, status int, name, desc string) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><error name=%q errorCode="%d" detailCode="4800"><description>%s</description></error>`, name, status, desc)
}

func (f *fakeCN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		f.fail(w, 401, "NotAuthorized", "a client certificate is required")
		return
	}
	subject, err := auth.SubjectDN(r.TLS.PeerCertificates[0])
	if err != nil {
		f.fail(w, 401, "InvalidToken", err.Error())
		return
	}
	id, hasID := strings.CutPrefix(r.URL.Path, "/cn/v2/node/")
	switch {
	case r.Method == http.MethodGet && hasID:
		n, ok := f.nodes[id]
		if !ok {
			f.fail(w, 404, "NotFound", "no node "+id)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		adapter.Encode(w, n, 2)
	case r.Method == http.MethodPost && r.URL.Path == "/cn/v2/node", r.Method == http.MethodPut && hasID:
		n, err := f.readNode(r)
		if err != nil {
			f.fail(w, 400, "InvalidRequest", err.Error())
			return
		}
		if !registerHas(n.Subject, subject) {
			f.fail(w, 401, "NotAuthorized", fmt.Sprintf("the certificate's subject %s is not a subject of node %s", subject, n.Identifier))
			return
		}
		_, known := f.nodes[n.Identifier]
		switch {
		case r.Method == http.MethodPost && known:
			f.fail(w, 409, "IdentifierNotUnique", "node "+n.Identifier+" is registered")
			return
		case r.Method == http.MethodPut && (!known || id != n.Identifier):
			f.fail(w, 404, "NotFound", "no node "+id)
			return
		}
		f.nodes[n.Identifier] = n
		f.calls = append(f.calls, r.Method+" "+n.Identifier)
		w.Header().Set("Content-Type", "text/xml")
		if r.Method == http.MethodPost {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><d1:nodeReference xmlns:d1=%q>%s</d1:nodeReference>`, adapter.NSv1, n.Identifier)
		}
	default:
		f.fail(w, 405, "NotImplemented", r.Method+" "+r.URL.Path)
	}
}

func (f *fakeCN) readNode(r *http.Request) (*adapter.Node, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	for {
		p, err := mr.NextPart()
		if err != nil {
			return nil, fmt.Errorf("no part node: %v", err)
		}
		if p.FormName() != "node" {
			continue
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		if err := xsdtest.Check(b); err != nil {
			return nil, fmt.Errorf("the node document is not valid: %v", err)
		}
		var n adapter.Node
		return &n, adapter.Decode(bytes.NewReader(b), &n)
	}
}

func registerHas(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestRegister: register reads the node document from the running node and
// sends it to a coordinating node with the node's client certificate: the
// first run registers (POST node), the second updates (PUT node/{id}), the
// documents are the node's own (valid, listing the services it serves); a
// certificate the CN refuses prints the CN's error, and register exits 1.
func TestRegister(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA := authNewCA(t, "Test CN server CA"), authNewCA(t, "Test DataONE client CA")
	nodeCert := authClientCert(t, clientCA, testNodeID)
	nodeDN := "CN=" + testNodeID + ",O=Example,C=US,DC=cilogon,DC=org"
	certFile, keyFile := registerWriteCert(t, dir, "node", nodeCert)
	strangerCert, strangerKey := registerWriteCert(t, dir, "stranger", authClientCert(t, clientCA, "Somebody Else"))
	caFile := authWrite(t, dir, "server-ca.pem", serverCA.pem)

	cn := &fakeCN{t: t, nodes: map[string]*adapter.Node{}}
	ts := httptest.NewUnstartedServer(cn)
	_, _, srvCert := registerServerCert(t, dir, serverCA)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: authPool(clientCA), ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	defer ts.Close()

	mn := startServer(t, "", fmt.Sprintf("D1BRIDGE_NODE_SUBJECTS=[%q]", nodeDN))
	cfg := authWrite(t, dir, "d1bridge.yaml", []byte(fmt.Sprintf("node:\n  id: %s\n  subjects: [%q]\n  clientCert: %q\n  clientKey: %q\n",
		testNodeID, nodeDN, certFile, keyFile)))
	args := []string{"register", "--config", cfg, "--node", mn.URL + "/d1", "--cn", ts.URL + "/cn", "--ca", caFile}

	code, out, errOut := runBinary(t, nil, args...)
	if code != 0 || !strings.Contains(out, "registered "+testNodeID+" at "+ts.URL+"/cn") || !strings.Contains(out, "nodeReference") {
		t.Fatalf("first register: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "is not reachable from another machine") {
		t.Errorf("no warning for the loopback base URL:\n%s", errOut)
	}
	code, out, errOut = runBinary(t, nil, args...)
	if code != 0 || !strings.Contains(out, "updated the registration of "+testNodeID) {
		t.Fatalf("second register: exit %d\n%s%s", code, out, errOut)
	}
	cn.mu.Lock()
	calls, doc := strings.Join(cn.calls, ", "), cn.nodes[testNodeID]
	cn.mu.Unlock()
	if calls != "POST "+testNodeID+", PUT "+testNodeID {
		t.Errorf("the CN saw %s, want a register then an update", calls)
	}
	var served adapter.Node
	decode(t, mn.get(t, "/d1/mn/v2/node"), &served)
	if doc == nil || doc.BaseURL != mn.URL+"/d1/mn" || doc.Identifier != testNodeID || len(doc.Services.Service) != len(served.Services.Service) ||
		!registerHas(doc.Subject, nodeDN) {
		t.Errorf("the CN holds %+v, want the node's own document %+v", doc, served)
	}

	// A certificate the CN does not take for the node's.
	code, out, errOut = runBinary(t, nil, append(args, "--cert", strangerCert, "--key", strangerKey)...)
	if code != 1 || !strings.Contains(errOut, "NotAuthorized: the certificate's subject CN=Somebody Else") {
		t.Errorf("a refused certificate: exit %d\n%s%s", code, out, errOut)
	}
	// --print sends nothing, and warns as a registration does (on stderr:
	// stdout is the document).
	code, out, errOut = runBinary(t, nil, "register", "--config", cfg, "--node", mn.URL+"/d1", "--print")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "<?xml") || !strings.Contains(out, "<identifier>"+testNodeID+"</identifier>") {
		t.Errorf("register --print: exit %d\n%s", code, out)
	}
	if !strings.Contains(errOut, "is not reachable from another machine") {
		t.Errorf("register --print: no warning for the loopback base URL:\n%s", errOut)
	}
	if code, _, errOut := runBinary(t, nil, "register", "--node", mn.URL+"/d1", "--cn", ts.URL); code != 1 || !strings.Contains(errOut, "node.clientCert") {
		t.Errorf("register without a client certificate: exit %d %q", code, errOut)
	}
}

// TestRegisterWithD1bridgeCN: against this binary serving the CN role over
// TLS with client certificates as credentials, register is answered with
// the CN's error (its CNRegister is NotImplemented), printed, exit 1; a
// certificate of an authority the CN does not trust ends the handshake,
// and register says so.
func TestRegisterWithD1bridgeCN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA, rogueCA := authNewCA(t, "Test CN server CA"), authNewCA(t, "Test DataONE client CA"), authNewCA(t, "Rogue CA")
	srvCert, srvKey, _ := registerServerCert(t, dir, serverCA)
	cn := authStartTLS(t, serverCA, "D1BRIDGE_TLS_CERT="+srvCert, "D1BRIDGE_TLS_KEY="+srvKey,
		"D1BRIDGE_TLS_CLIENTCAS="+authWrite(t, dir, "client-cas.pem", clientCA.pem), "D1BRIDGE_NODE_ID=urn:node:testcn")
	nodeDN := "CN=" + testNodeID + ",O=Example,C=US,DC=cilogon,DC=org"
	mn := startServer(t, "", fmt.Sprintf("D1BRIDGE_NODE_SUBJECTS=[%q]", nodeDN))
	certFile, keyFile := registerWriteCert(t, dir, "node", authClientCert(t, clientCA, testNodeID))
	rogueCert, rogueKey := registerWriteCert(t, dir, "rogue", authClientCert(t, rogueCA, testNodeID))
	caFile := authWrite(t, dir, "server-ca.pem", serverCA.pem)
	args := []string{"register", "--node", mn.URL + "/d1", "--cn", cn.URL + "/d1", "--ca", caFile}
	env := []string{"D1BRIDGE_NODE_ID=" + testNodeID, fmt.Sprintf("D1BRIDGE_NODE_SUBJECTS=[%q]", nodeDN)}

	code, out, errOut := runBinary(t, env, append(args, "--cert", certFile, "--key", keyFile)...)
	if code != 1 || !strings.Contains(errOut, "NotImplemented: CNRegister is not implemented by this coordinating node") {
		t.Errorf("register with the d1bridge CN: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runBinary(t, env, append(args, "--cert", rogueCert, "--key", rogueKey)...)
	if code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("a certificate of an untrusted authority: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("with a rogue certificate: %s", errOut)
}
