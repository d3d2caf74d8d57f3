/* file_replace.h - a small file of ours whole: written whole or not at all, relative to a
 * directory descriptor (a temp file beside it, synced, renamed over the name), and read whole.
 */
#ifndef AUTOBATCH_FILE_REPLACE_H
#define AUTOBATCH_FILE_REPLACE_H

#include <stddef.h>
#include <sys/types.h>

/* Writes all of buf to fd, through short writes and EINTR: 0 or a negative errno. */
int ab_write_all(int fd, const char *buf, size_t len);

/* The first size bytes of fd (a file the caller has checked: regular, of its owner, small),
 * from its start, NUL-terminated in *out to free: 0, -ENOMEM, or -EPROTO when fewer came. */
int ab_read_whole(int fd, size_t size, char **out);

/* Replaces dirfd/name with text (mode, the caller's owner). What is at name now must be
 * nothing or a regular file of the caller's: a FIFO, a device, a symlink or another user's
 * file is refused (-EEXIST) and left alone; a hard link is replaced, never written through.
 * shown names the file in messages. 0, or a negative errno with a message. */
int ab_file_replace(int dirfd, const char *name, const char *text, mode_t mode,
		    const char *shown, char *err, size_t errlen);

#endif
