/*
 * A compile-only stand-in for macOS (`make portcheck`). macOS is not available to
 * this project's CI, so the sources are compiled here the way a macOS build would
 * see them: __linux__ undefined and __APPLE__ defined, so every platform branch
 * takes its non-Linux side; the Linux-only functions and constants made unusable
 * (a use is an error); the Darwin-only interfaces the sources call declared as
 * macOS declares them. It proves that nothing outside `#if defined(__linux__)`
 * needs Linux, not that the macOS build links or runs.
 */
#ifndef SHIMBRIDGE_PORT_DARWIN_H
#define SHIMBRIDGE_PORT_DARWIN_H

/* glibc's own declarations first: a poisoned name in them would count as a use. */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Constants macOS does not have. */
#undef SOCK_CLOEXEC
#undef SOCK_NONBLOCK
#undef O_PATH
#undef O_TMPFILE
#undef AT_EMPTY_PATH
#undef SO_PEERCRED
#undef SO_PASSCRED
#undef MSG_NOSIGNAL
#undef MSG_CMSG_CLOEXEC
#undef F_SETPIPE_SZ
#undef F_GETPIPE_SZ
#undef RLIMIT_RTPRIO
#undef RLIMIT_MSGQUEUE
#undef RLIMIT_SIGPENDING
#undef RLIMIT_NICE
#undef CLONE_VM
#undef CLONE_VFORK
#undef CLONE_NEWNS
#undef CLONE_NEWPID
#undef CLONE_NEWNET

/*
 * Darwin's own interfaces, and those its libc declares by default that glibc
 * declares only with _GNU_SOURCE, as macOS's headers declare them.
 */
#include <stdarg.h>
int	 getpeereid(int, uid_t *, gid_t *);
int	 asprintf(char **, const char *, ...);
int	 vasprintf(char **, const char *, va_list);
void	*memmem(const void *, size_t, const void *, size_t);
char	*strcasestr(const char *, const char *);
int	 mkostemp(char *, int);
int	 memset_s(void *, size_t, int, size_t);
#define LOCAL_PEERPID	0x002
#define SOL_LOCAL	0

/* Functions macOS does not have. */
#pragma GCC poison pipe2 accept4 dup3 clone clone3 unshare setns prctl pivot_root \
	mount umount2 epoll_create1 epoll_ctl epoll_wait signalfd memfd_create splice \
	tee vmsplice getrandom execveat close_range pidfd_open pidfd_send_signal sendfile \
	explicit_bzero reallocarray strchrnul memrchr mempcpy secure_getenv \
	get_current_dir_name program_invocation_short_name program_invocation_name \
	ppoll setresuid setresgid getresuid getresgid fexecve posix_fadvise fallocate \
	posix_fallocate ptsname_r eventfd timerfd_create inotify_init1 sysinfo \
	sched_getaffinity getauxval recvmmsg sendmmsg euidaccess eaccess sigtimedwait \
	sigwaitinfo mremap statx renameat2 copy_file_range malloc_usable_size mallopt \
	malloc_trim mallinfo syncfs

#endif
