// Package auth turns requests into sessions and decides what a session may do.
package auth

import "github.com/d1bridge/d1bridge/adapter"

// Perm is what a route requires of its caller. Object permissions (Read, Write,
// ChangePermission) are checked against the object the route names.
type Perm uint8

const (
	// Public routes need nothing.
	Public Perm = iota
	// Read, Write and ChangePermission are the DataONE access levels on an object.
	Read
	Write
	ChangePermission
	// Submit is the node-level right to create objects (config node.submitters).
	Submit
	// Authenticated needs any credential.
	Authenticated
	// Trusted is for the node's own subjects, its administrators and the CN subjects.
	Trusted
)

var permNames = [...]string{"public", "read", "write", "changePermission", "submit", "authenticated", "trusted"}

func (p Perm) String() string { return permNames[p] }

// OnObject reports whether p is an access level on an object.
func (p Perm) OnObject() bool { return p == Read || p == Write || p == ChangePermission }

// Permission is the DataONE permission of an object-level Perm.
func (p Perm) Permission() adapter.Permission {
	switch p {
	case Read:
		return adapter.PermRead
	case Write:
		return adapter.PermWrite
	case ChangePermission:
		return adapter.PermChangePermission
	}
	return ""
}

// PermOf maps a DataONE permission name (isAuthorized's action) to a Perm.
func PermOf(p adapter.Permission) (Perm, bool) {
	switch p {
	case adapter.PermRead:
		return Read, true
	case adapter.PermWrite:
		return Write, true
	case adapter.PermChangePermission:
		return ChangePermission, true
	}
	return Public, false
}
