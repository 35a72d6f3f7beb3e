//go:build !linux

package registry_test

import "time"

func threadCPU() time.Duration { return 0 }

const haveThreadCPU = false
