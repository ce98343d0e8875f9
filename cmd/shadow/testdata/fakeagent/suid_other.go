//go:build !amd64

package main

// legacyCalls: other arches have only the *at forms.
func legacyCalls() []suidCall { return nil }
