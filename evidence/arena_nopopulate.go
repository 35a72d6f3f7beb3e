//go:build unix && !linux

package evidence

const mapPopulate = 0
