//go:build !linux

package fsblobs

// noATime: none outside Linux.
const noATime = 0
