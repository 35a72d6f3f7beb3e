//go:build !linux

package etcd_test

import "time"

func threadCPU() time.Duration { return 0 }

const haveThreadCPU = false
