// Package s3 keeps object bytes in an S3-compatible bucket (AWS S3, MinIO,
// versitygw, Ceph RGW...): a node.Blobs over minio-go, whose requests go
// through the upstream's client (metrics, breaker, retries of GET and HEAD).
//
// Keys are laid out by upstream.BlobName under the prefix:
// <prefix><h[0:2]>/<h[2:4]>/<key or ~digest>.
//
// Put reads the object into one part buffer of partSize bytes at a time: an
// object that fits is sent with one PUT (with its Content-MD5), a larger one as
// a multipart upload of parts sent one after another, each with its
// Content-MD5. Memory per Put is therefore one part buffer (partSize ×
// concurrency 1; the buffers are pooled), whatever the object's size. S3 only
// shows an object once its PUT or multipart upload completes, so a key never
// holds a partial object; on any error the multipart upload is aborted, so
// that no parts are left behind. Durability is the bucket's.
//
// Get's body streams, and is an upstream.Seekable whose ranges reopen the
// object with a ranged GET pinned to the version first read, by its ETag or,
// for a file without one, its Last-Modified and size (an overwrite in between
// fails the read instead of mixing two versions). A file without an ETag read
// in the second it was written has no such pin (upstream.PinOf): its body does
// not seek.
//
// Options (upstreams[].options):
//
//	bucket:        the bucket (required)
//	region:        the bucket's region (default us-east-1)
//	accessKey:     the access key id (empty: anonymous)
//	secretKey:     the secret; or secretKeyFile, a file holding it
//	prefix:        a key prefix, such as "d1bridge/" (default none)
//	holdings:      the key prefix of the objects the store lists as a harvest
//	               source, such as "collection/" (a / is added when missing;
//	               default: prefix); see List
//	createBucket:  create the bucket at start when it is missing (default false)
//	partSize:      multipart part size and single-PUT limit, in bytes
//	               (default 16 MiB; at least 5 MiB, at most 5 GiB)
package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/d1bridge/d1bridge/config"
	"github.com/d1bridge/d1bridge/mappings/node"
	"github.com/d1bridge/d1bridge/mappings/upstream"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Options are the upstream's options for an S3 store.
type Options struct {
	Bucket        string  `yaml:"bucket"`
	Region        string  `yaml:"region"`
	AccessKey     string  `yaml:"accessKey"`
	SecretKey     string  `yaml:"secretKey"`
	SecretKeyFile string  `yaml:"secretKeyFile"`
	Prefix        string  `yaml:"prefix"`
	Holdings      *string `yaml:"holdings"`
	CreateBucket  bool    `yaml:"createBucket"`
	PartSize      int64   `yaml:"partSize"`
}

// Part sizes: S3 refuses parts under 5 MiB (but the last) and over 5 GiB.
const (
	DefaultPartSize = 16 << 20
	MinPartSize     = 5 << 20
	MaxPartSize     = 5 << 30
)

// Store is a node.Blobs in an S3 bucket. It is safe for concurrent use.
type Store struct {
	c       *upstream.Client
	core    minio.Core
	bucket  string
	prefix  string
	partLen int64
	// holdings is the key prefix List lists; pageSize is how many objects
	// one List call reads.
	holdings string
	pageSize int
	parts    sync.Pool // *[]byte of partLen
}

var (
	_ node.Blobs  = (*Store)(nil)
	_ node.Lister = (*Store)(nil)
)

// New opens the bucket u describes (u.BaseURL is the endpoint, such as
// https://s3.eu-west-1.amazonaws.com), sending every request through c. It
// contacts the upstream only when createBucket is set.
func New(u config.Upstream, c *upstream.Client) (*Store, error) {
	s, o, err := parse(u, c.Transport())
	if err != nil {
		return nil, err
	}
	s.c = c
	if o.CreateBucket {
		if err := s.createBucket(o.Region); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// CheckOptions reports every problem of u's options and baseURL that New
// would fail on, without contacting the server (whether createBucket could
// create the bucket is not known until then). It reads secretKeyFile.
func CheckOptions(u config.Upstream) error {
	_, _, err := parse(u, nil) // a nil rt: minio's own transport, never used
	return err
}

// parse decodes and checks u's options and builds the store over a minio
// client whose requests go through rt, without its upstream client: New's
// part that sends nothing.
func parse(u config.Upstream, rt http.RoundTripper) (*Store, Options, error) {
	var o Options
	if err := upstream.DecodeOptions(u, &o); err != nil {
		return nil, o, fmt.Errorf("s3: %w", err)
	}
	errs := []error{o.check()}
	endpoint, err := url.Parse(u.BaseURL)
	switch {
	case err != nil || (endpoint.Scheme != "http" && endpoint.Scheme != "https") || endpoint.Host == "":
		errs = append(errs, fmt.Errorf("baseURL %q is not an http(s) endpoint", u.BaseURL))
		endpoint = nil
	case strings.Trim(endpoint.Path, "/") != "":
		errs = append(errs, fmt.Errorf("baseURL %q has a path; give the bucket as options.bucket", u.BaseURL))
		endpoint = nil
	}
	secret := o.SecretKey
	if o.SecretKeyFile != "" {
		b, err := os.ReadFile(o.SecretKeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("options.secretKeyFile: %w", err))
		}
		secret = strings.TrimRight(string(b), "\r\n")
	}
	var mc *minio.Client
	if endpoint != nil {
		creds := credentials.NewStaticV4(o.AccessKey, secret, "")
		if o.AccessKey == "" {
			creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
		}
		mc, err = minio.New(endpoint.Host, &minio.Options{
			Creds:     creds,
			Secure:    endpoint.Scheme == "https",
			Transport: rt,
			Region:    o.Region,
			// Retries belong to the upstream client: GET and HEAD only, before
			// any body byte, and never against an open breaker.
			MaxRetries: 1,
		})
		errs = append(errs, err)
	}
	if err := upstream.OptionProblems("s3", u, errs...); err != nil {
		return nil, o, err
	}
	s := &Store{core: minio.Core{Client: mc}, bucket: o.Bucket, prefix: o.Prefix, partLen: o.PartSize,
		holdings: *o.Holdings, pageSize: listPage}
	s.parts.New = func() any { b := make([]byte, s.partLen); return &b }
	return s, o, nil
}

// check validates the options and fills in the defaults.
func (o *Options) check() error {
	var errs []error
	if o.Bucket == "" {
		errs = append(errs, errors.New("options.bucket is required"))
	} else if err := s3utils.CheckValidBucketName(o.Bucket); err != nil {
		errs = append(errs, fmt.Errorf("options.bucket %q: %w", o.Bucket, err))
	}
	if o.SecretKey != "" && o.SecretKeyFile != "" {
		errs = append(errs, errors.New("options.secretKey and options.secretKeyFile are both set; keep one"))
	}
	if o.AccessKey == "" && (o.SecretKey != "" || o.SecretKeyFile != "") {
		errs = append(errs, errors.New("options.secretKey is set without options.accessKey"))
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < MinPartSize || o.PartSize > MaxPartSize {
		errs = append(errs, fmt.Errorf("options.partSize %d is outside [%d, %d] (5 MiB to 5 GiB)", o.PartSize, MinPartSize, MaxPartSize))
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if strings.HasPrefix(o.Prefix, "/") {
		errs = append(errs, fmt.Errorf("options.prefix %q must not start with /", o.Prefix))
	}
	switch {
	case o.Holdings == nil:
		o.Holdings = &o.Prefix
	case strings.HasPrefix(*o.Holdings, "/"):
		errs = append(errs, fmt.Errorf("options.holdings %q must not start with /", *o.Holdings))
	case *o.Holdings != "" && !strings.HasSuffix(*o.Holdings, "/"):
		// A folder, as the WebDAV store's holdings are: "repo" lists repo/,
		// not repository/ beside it.
		h := *o.Holdings + "/"
		o.Holdings = &h
	}
	return errors.Join(errs...)
}

func (s *Store) createBucket(region string) error {
	ctx, cancel := s.c.WithTimeout(upstream.WithOperation(context.Background(), "CreateBucket"))
	defer cancel()
	ok, err := s.core.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.failOn(err, fmt.Sprintf("bucket %q", s.bucket), "")
	}
	if ok {
		return nil
	}
	err = s.core.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		return s.failOn(err, fmt.Sprintf("bucket %q", s.bucket), "")
	}
	return nil
}

// Ping checks that the bucket answers and exists, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.c.WithTimeout(upstream.WithOperation(ctx, "HeadBucket"))
	defer cancel()
	ok, err := s.core.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.failOn(err, fmt.Sprintf("bucket %q", s.bucket), "")
	}
	if !ok {
		return s.failOn(minio.ErrorResponse{StatusCode: 404, Code: "NoSuchBucket"}, fmt.Sprintf("bucket %q", s.bucket), "")
	}
	return nil
}

// name is the object name of key.
func (s *Store) name(key string) string { return s.prefix + upstream.BlobName(key) }
