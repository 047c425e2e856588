package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// EnterSandbox is the runner's side of the local launcher, run inside the
// network and mount namespaces the launcher made: it brings up the
// namespace's loopback (its only interface, so every other address has no
// route and a dial fails in the kernel before any packet exists), makes
// /etc/claude-code a private tmpfs (the managed settings written there are
// this run's alone and vanish with it), and serves on the namespace's
// 127.0.0.1 a forwarder to the launcher's unix socket, which reaches the
// control plane. It returns the control plane's URL as seen from inside.
func EnterSandbox(ctx context.Context, socket string) (string, error) {
	if err := loopbackUp(); err != nil {
		return "", fmt.Errorf("launcher: bring up loopback: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("launcher: make mounts private: %w", err)
	}
	if err := os.MkdirAll(settingsDir, 0o755); err != nil {
		return "", err
	}
	if err := syscall.Mount("tmpfs", settingsDir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "mode=0755,size=1m"); err != nil {
		return "", fmt.Errorf("launcher: private %s: %w", settingsDir, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go forward(ln, func() (net.Conn, error) { return net.Dial("unix", socket) })
	return "http://" + ln.Addr().String(), nil
}

// settingsDir holds Claude Code's managed settings on Linux.
const settingsDir = "/etc/claude-code"

// forward copies every connection ln accepts to one dial makes, both ways.
func forward(ln net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := dial()
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	type halfCloser interface{ CloseWrite() error }
	if h, ok := c.(halfCloser); ok {
		_ = h.CloseWrite()
	}
}

// loopbackUp sets IFF_UP on "lo" (SIOCGIFFLAGS, SIOCSIFFLAGS): a new
// network namespace starts with it down.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct ifreq: a 16-byte name, then the flags (a short) in the union.
	var ifr [40]byte
	copy(ifr[:], "lo")
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return errno
	}
	flags := *(*uint16)(unsafe.Pointer(&ifr[16])) | syscall.IFF_UP
	*(*uint16)(unsafe.Pointer(&ifr[16])) = flags
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		return errno
	}
	return nil
}

// ErrNotRoot: the local launcher needs root (namespaces, the agent's user).
var ErrNotRoot = errors.New("launcher: the local launcher must run as root: it makes a network namespace per run and runs the agent as another user")
