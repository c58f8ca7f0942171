package servers

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for tests: it issues server
// certificates for loopback addresses and client certificates with DataONE
// subjects, written as PEM files in its directory.
type CA struct {
	// File is the CA certificate's PEM file.
	File string
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

// NewCA makes a CA named name whose files go to dir (made if missing).
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{dir: dir, cert: cert, key: key, File: filepath.Join(dir, fileName(name)+"-ca.pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1 and localhost; it returns
// the certificate's and the key's PEM files.
func (ca *CA) Server(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate whose subject is the DataONE subject
// given (an RFC 2253 distinguished name, most specific first, as DataONE
// writes them: "CN=urn:node:X,DC=dataone,DC=org"), valid from notBefore to
// notAfter (zero: from an hour ago for a day). It returns the certificate's
// and the key's PEM files.
func (ca *CA) Client(t testing.TB, name, subject string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	raw, err := asn1.Marshal(rdnSequence(t, subject))
	if err != nil {
		t.Fatal(err)
	}
	return ca.issue(t, name, &x509.Certificate{
		RawSubject:  raw,
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(ca.dir, fileName(name)+".pem")
	keyFile = filepath.Join(ca.dir, fileName(name)+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

// Attribute types of DataONE subjects.
var rdnTypes = map[string]asn1.ObjectIdentifier{
	"CN": {2, 5, 4, 3},
	"O":  {2, 5, 4, 10},
	"OU": {2, 5, 4, 11},
	"C":  {2, 5, 4, 6},
	"L":  {2, 5, 4, 7},
	"ST": {2, 5, 4, 8},
	"DC": {0, 9, 2342, 19200300, 100, 1, 25},
}

// rdnSequence is subject's RDN sequence: the name's last attribute first, as
// RFC 2253 prints a sequence in reverse. Values hold no commas or escapes.
func rdnSequence(t testing.TB, subject string) pkix.RDNSequence {
	t.Helper()
	parts := strings.Split(subject, ",")
	var seq pkix.RDNSequence
	for i := len(parts) - 1; i >= 0; i-- {
		typ, val, ok := strings.Cut(strings.TrimSpace(parts[i]), "=")
		oid, known := rdnTypes[strings.ToUpper(typ)]
		if !ok || !known || val == "" {
			t.Fatalf("servers: subject %q: %q is not TYPE=value with a type of %v", subject, parts[i], "CN O OU C L ST DC")
		}
		var v any = val
		if strings.ToUpper(typ) == "DC" {
			v = asn1.RawValue{Tag: asn1.TagIA5String, Bytes: []byte(val)}
		}
		seq = append(seq, []pkix.AttributeTypeAndValue{{Type: oid, Value: v}})
	}
	return seq
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileName is name as a file name.
func fileName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return r
		}
		return '_'
	}, name)
}
