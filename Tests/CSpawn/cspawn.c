#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>
#include "cspawn.h"

int satchel_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int satchel_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}
