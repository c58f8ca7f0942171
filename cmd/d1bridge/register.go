package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/d1bridge/d1bridge/auth"
	"github.com/d1bridge/d1bridge/cmd/d1bridge/internal/d1client"
	"github.com/d1bridge/d1bridge/config"
)

// registerCmd is `d1bridge register`: it sends this node's document to a
// coordinating node, CNRegister.register (POST {cn}/v2/node) the first time
// and updateNodeCapabilities (PUT {cn}/v2/node/{id}) once the CN has the
// node (GET {cn}/v2/node/{id} answers it), presenting the node's client
// certificate (node.clientCert and node.clientKey), and prints what the CN
// answered. The document is the one the running node serves (GET
// {mn}/v2/node), so that what the CN records is what clients read: it
// lists exactly the services the node's store and configuration give it.
func registerCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	flags := newFlags("register")
	path := flags.String("config", "", "YAML configuration file: the node's base URL, id and client certificate (node.clientCert, node.clientKey)")
	cnURL := flags.String("cn", "", "the coordinating node's base URL, such as https://cn.dataone.org/cn (required)")
	nodeURL := flags.String("node", "", "read the node document from this member node base URL (default: the configuration's node.baseURL + /mn)")
	certFile := flags.String("cert", "", "the client certificate to present (default node.clientCert)")
	keyFile := flags.String("key", "", "its key (default node.clientKey)")
	caFile := flags.String("ca", "", "trust the CN's (and the node's) certificate from these authorities (PEM `FILE`) besides the system's")
	show := flags.Bool("print", false, "print the node document that would be sent, and send nothing")
	if help, err := parseFlags(flags, args, stdout); help || err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("register: unexpected argument %q (d1bridge register --help)", flags.Arg(0))
	}
	if *cnURL == "" && !*show {
		return errors.New("register: --cn is required (d1bridge register --help)")
	}
	cfg, err := loadConfig(*path, getenv)
	if err != nil {
		return err
	}
	// The document, from the node itself.
	node, err := cliNodeClient(cfg, *nodeURL, "mn", cliCredential{ca: *caFile}, 1)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	doc, n, err := node.Node(ctx)
	if err != nil {
		return fmt.Errorf("register: reading the node document from %s (is the node running? --node names it): %s", node.Base, cliExceptionText(err))
	}
	for _, w := range registerWarnings(cfg, n) {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if *show {
		_, err := stdout.Write(doc)
		return err
	}

	cert, key := cliFirstSet(*certFile, cfg.Node.ClientCert), cliFirstSet(*keyFile, cfg.Node.ClientKey)
	if cert == "" || key == "" {
		return errors.New("register: a coordinating node knows this node by its client certificate: set node.clientCert and node.clientKey (or --cert and --key)")
	}
	tc, err := d1client.TLSConfig(cert, key, *caFile)
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	// Present the certificate whatever authorities the CN lists, so that a
	// CN that does not trust it says so instead of seeing no certificate.
	own := tc.Certificates[0]
	if leaf, err := x509.ParseCertificate(own.Certificate[0]); err == nil {
		if dn, err := auth.SubjectDN(leaf); err == nil && !slices.Contains(n.Subject, dn) {
			fmt.Fprintf(stderr, "warning: the client certificate's subject %s is not among the node document's subjects %q: a CN matches them (set node.subjects)\n", dn, n.Subject)
		}
	}
	tc.Certificates = nil
	tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &own, nil }
	base, err := d1client.BaseURL(*cnURL, "cn")
	if err != nil {
		return fmt.Errorf("register: --cn: %w", err)
	}
	cn := &d1client.Client{Base: base, HTTP: d1client.NewHTTP(tc, 1)}

	known, _, err := cn.Registered(ctx, n.Identifier)
	if err != nil {
		return fmt.Errorf("register: asking %s whether it has %s: %s", base, n.Identifier, cliExceptionText(err))
	}
	if known {
		answer, err := cn.UpdateNodeCapabilities(ctx, n.Identifier, doc)
		if err != nil {
			return fmt.Errorf("register: updateNodeCapabilities of %s at %s: %s", n.Identifier, base, cliExceptionText(err))
		}
		fmt.Fprintf(stdout, "updated the registration of %s at %s; the CN answered: %s\n", n.Identifier, base, registerOneLine(answer))
		return nil
	}
	answer, err := cn.Register(ctx, doc)
	if err != nil {
		return fmt.Errorf("register: register of %s at %s: %s", n.Identifier, base, cliExceptionText(err))
	}
	fmt.Fprintf(stdout, "registered %s at %s; the CN answered: %s\n", n.Identifier, base, registerOneLine(answer))
	fmt.Fprintln(stderr, "A new member node waits for the coordinating node's operators to approve it; run register again to update its document.")
	return nil
}

// registerWarnings are what makes a registered document of little use: a
// node id other than the configuration's, a base URL no other machine can
// reach, the placeholder subject, no contact subject.
func registerWarnings(cfg *config.Config, n *adapter.Node) []string {
	id, baseURL, subjects := n.Identifier, n.BaseURL, n.Subject
	var out []string
	if id != cfg.Node.ID {
		out = append(out, fmt.Sprintf("the node document names %s, the configuration node.id %s", id, cfg.Node.ID))
	}
	if u, err := url.Parse(baseURL); err == nil {
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
			out = append(out, fmt.Sprintf("the node document's baseURL %s is not reachable from another machine: set node.baseURL", baseURL))
		}
	}
	if len(subjects) == 1 && subjects[0] == "CN="+id+",DC=dataone,DC=org" && len(cfg.Node.Subjects) == 0 {
		out = append(out, "node.subjects is empty: the document names a placeholder subject; set it to the subject of node.clientCert")
	}
	if len(n.ContactSubject) == 0 {
		out = append(out, "the node document names no contactSubject, which a DataONE CN requires: set node.contactSubjects")
	}
	return out
}

// registerOneLine is an answer body on one line.
func registerOneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if s == "" {
		return "(status 200, no body)"
	}
	s = strings.TrimPrefix(s, `<?xml version="1.0" encoding="UTF-8"?> `)
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
