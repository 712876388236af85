/*
 * The two spawn methods of `progeny bench` that Rust cannot express:
 *
 *  - vfork(2) + execve(2): the child runs on the parent's own stack until it
 *    execs, so the function that calls vfork must be compiled knowing that it
 *    "returns twice" (C compilers do; Rust has no stable way to say so).
 *    https://man7.org/linux/man-pages/man2/vfork.2.html
 *
 *  - the floor of process creation: clone(2) with CLONE_VM | CLONE_VFORK
 *    whose child exits at once without exec, on a stack the caller provides.
 *    https://man7.org/linux/man-pages/man2/clone.2.html
 *
 * Both return the child's pid (the caller reaps it) or -1 with errno set.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* Exit status the child reports when its housekeeping or execve fails, so
 * the parent sees a failed run instead of a fast one. */
#define PROGENY_BENCH_EXEC_FAILED 127

/*
 * vfork(2) + execve(2). The child's stdout becomes stdout_fd and, unless
 * stdin_fd is -1, its stdin becomes stdin_fd (the indexer's pipe ends, which
 * the caller keeps above 2 so that neither dup2 can overwrite the other's
 * source).
 */
pid_t progeny_bench_vfork_execve(const char *path, char *const argv[],
                                 char *const envp[], int stdin_fd,
                                 int stdout_fd)
{
    pid_t pid = vfork();
    if (pid == 0) {
        /* Child, borrowing the parent's memory and stack: only raw system
         * calls until execve, no return from this function. The raw calls
         * leave the shared errno alone. */
        if ((stdin_fd >= 0 && syscall(SYS_dup2, stdin_fd, 0) < 0) ||
            syscall(SYS_dup2, stdout_fd, 1) < 0)
            syscall(SYS_exit_group, PROGENY_BENCH_EXEC_FAILED);
        syscall(SYS_execve, path, argv, envp);
        syscall(SYS_exit_group, PROGENY_BENCH_EXEC_FAILED);
    }
    return pid;
}

static int progeny_bench_floor_child(void *unused)
{
    (void)unused;
    /* No exec: the cheapest child there is. */
    syscall(SYS_exit_group, 0);
    return 0;
}

pid_t progeny_bench_clone_floor(void *stack, size_t stack_size)
{
    /* The stack grows down on every architecture this builds for. */
    char *stack_top = (char *)stack + stack_size;
    return clone(progeny_bench_floor_child, stack_top,
                 CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
}
