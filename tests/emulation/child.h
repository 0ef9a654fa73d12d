/* The emulation's self-tests (test_emu_sched.cpp, nn/test_emu_async.c): a case run in a
 * child process, where a misuse the emulation catches aborts it and a hang is stopped
 * after 20 s. emu_run_child: body(arg) in the child; its wait status, and in msg (cap
 * bytes, terminated) the start of what it wrote to stderr. */
#ifndef EMU_CHILD_H
#define EMU_CHILD_H
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int emu_run_child(void (*body)(const void *), const void *arg, char *msg, size_t cap) {
    int fd[2];
    if (pipe(fd)) { perror("pipe"); exit(1); }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        alarm(20); /* a case that hangs or spins fails */
        body(arg);
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    char buf[512];
    ssize_t r;
    while ((r = read(fd[0], buf, sizeof buf)) > 0) /* all of it; what does not fit in msg is dropped */
        for (ssize_t i = 0; i < r && n < cap - 1; i++) msg[n++] = buf[i];
    msg[n] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}
#endif
