// Package adapter holds the DataONE contract: the role interfaces, the v2 types
// with their v1 views, and the one exception type. It knows no HTTP framework.
package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Kind is a DataONE exception kind. The zero value is ServiceFailure, the safe default.
type Kind uint8

const (
	ServiceFailure Kind = iota
	InvalidToken
	NotAuthorized
	NotFound
	InvalidRequest
	NotImplemented
	IdentifierNotUnique
	UnsupportedType
	InsufficientResources
	InvalidSystemMetadata
	VersionMismatch
	SynchronizationFailed
	numKinds
)

// kinds is the exception catalog: name and HTTP status of every kind (API.md §6.2).
// SynchronizationFailed is never an HTTP answer, only the payload of POST /error.
var kinds = [numKinds]struct {
	name   string
	status int
}{
	ServiceFailure:        {"ServiceFailure", http.StatusInternalServerError},
	InvalidToken:          {"InvalidToken", http.StatusUnauthorized},
	NotAuthorized:         {"NotAuthorized", http.StatusUnauthorized},
	NotFound:              {"NotFound", http.StatusNotFound},
	InvalidRequest:        {"InvalidRequest", http.StatusBadRequest},
	NotImplemented:        {"NotImplemented", http.StatusNotImplemented},
	IdentifierNotUnique:   {"IdentifierNotUnique", http.StatusConflict},
	UnsupportedType:       {"UnsupportedType", http.StatusBadRequest},
	InsufficientResources: {"InsufficientResources", http.StatusRequestEntityTooLarge},
	InvalidSystemMetadata: {"InvalidSystemMetadata", http.StatusBadRequest},
	VersionMismatch:       {"VersionMismatch", http.StatusConflict},
	SynchronizationFailed: {"SynchronizationFailed", 0},
}

// Kinds lists every kind, in catalog order.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

func (k Kind) String() string { return kinds[k].name }

// Status is the HTTP status that carries the kind.
func (k Kind) Status() int { return kinds[k].status }

// KindByName finds a kind by its DataONE name.
func KindByName(name string) (Kind, bool) {
	for i, k := range kinds {
		if k.name == name {
			return Kind(i), true
		}
	}
	return ServiceFailure, false
}

// Exception is a DataONE error. Err, the cause, is logged and never rendered.
type Exception struct {
	Kind             Kind
	DetailCode       string
	PID              string
	NodeID           string
	Description      string
	TraceInformation string
	// Status, when set, is the HTTP status to send instead of the kind's (405 for a
	// wrong method); the document's errorCode follows it.
	Status int
	Err    error
}

// HTTPStatus is the status the exception is sent with.
func (e *Exception) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return e.Kind.Status()
}

// Errorf makes an exception of kind k; detail may be empty, in which case the writer
// fills in the operation's default detail code.
func Errorf(k Kind, format string, a ...any) *Exception {
	return &Exception{Kind: k, Description: fmt.Sprintf(format, a...)}
}

// Wrap makes an exception of kind k around a cause.
func Wrap(k Kind, err error, format string, a ...any) *Exception {
	e := Errorf(k, format, a...)
	e.Err = err
	return e
}

// WithPID sets the identifier the exception concerns and returns the exception.
func (e *Exception) WithPID(pid string) *Exception { e.PID = pid; return e }

func (e *Exception) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Description, e.Err)
	}
	return e.Kind.String() + ": " + e.Description
}

func (e *Exception) Unwrap() error { return e.Err }

// IsKind reports whether err is, or wraps, an exception of kind k.
func IsKind(err error, k Kind) bool {
	var e *Exception
	return errors.As(err, &e) && e.Kind == k
}

// AsException turns any error into an Exception: exceptions pass through, a deadline
// or cancellation becomes a ServiceFailure that says so, anything else a ServiceFailure
// whose description does not leak the cause.
func AsException(err error) *Exception {
	var e *Exception
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Wrap(ServiceFailure, err, "the operation timed out")
	case errors.Is(err, context.Canceled):
		return Wrap(ServiceFailure, err, "the request was canceled")
	}
	return Wrap(ServiceFailure, err, "internal error")
}
