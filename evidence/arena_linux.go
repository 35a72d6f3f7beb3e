//go:build linux

package evidence

import "syscall"

// mapPopulate has the kernel fault a new arena in during mmap, cheaper than
// touching each page.
const mapPopulate = syscall.MAP_POPULATE
