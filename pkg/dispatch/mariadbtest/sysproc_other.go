//go:build !linux

package mariadbtest

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
