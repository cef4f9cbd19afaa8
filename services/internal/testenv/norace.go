//go:build !race

package testenv

// RaceDetector is true in a build with the race detector (go test -race).
const RaceDetector = false
