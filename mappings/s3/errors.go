package s3

import (
	"errors"
	"fmt"

	"github.com/d1bridge/d1bridge/adapter"
	"github.com/minio/minio-go/v7"
)

// fail translates an error of minio-go about key (or the bucket) into an
// adapter.Exception: exceptions of the upstream client (an open breaker) pass
// through; S3 error codes and statuses map as upstream.Client.StatusError
// does, with NoSuchKey a NotFound; transport errors say the upstream timed out
// or is unreachable.
func (s *Store) fail(err error, key string) error {
	return s.failOn(err, fmt.Sprintf("object %q", key), key)
}

// failOn is fail for a request about what (an object, a listing).
func (s *Store) failOn(err error, what, key string) error {
	var ex *adapter.Exception
	if errors.As(err, &ex) {
		return ex
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == "NoSuchKey":
			return adapter.Wrap(adapter.NotFound, err, "no bytes are stored under key %q", key)
		case er.Code == "NoSuchBucket":
			return adapter.Wrap(adapter.ServiceFailure, err, "bucket %q does not exist on upstream %q", s.bucket, s.c.Name())
		case er.StatusCode == 0: // refused by the client library before sending
			return adapter.Wrap(adapter.ServiceFailure, err, "the S3 client refused a request for %s to upstream %q", what, s.c.Name())
		}
		return s.c.StatusError(er.StatusCode, what, err)
	}
	return s.c.Error(err, what)
}
