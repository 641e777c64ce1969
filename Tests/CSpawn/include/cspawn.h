// What Swift's Glibc module does not show of posix_spawn and pipe2: glibc declares
// posix_spawn_file_actions_addclosefrom_np (2.34 and later) and pipe2 only for _GNU_SOURCE builds.
#ifndef SATCHEL_CSPAWN_H
#define SATCHEL_CSPAWN_H

#include <spawn.h>

/// Adds to `actions` the closing of every descriptor from `from` on, in the child.
int satchel_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from);

/// A pipe whose two ends close on exec.
int satchel_pipe_cloexec(int fds[2]);

#endif
