/* session_file.h: the saved-session file (sessions.c), shared by `strata serve` and `strata chat`
 * so that both keep sessions in the same folder, under the same name rules, in the same format,
 * and refuse a bad file with the same message.
 *
 * DIR/NAME.session holds an engine's state blob (for the real engine, strata.h's
 * st_session_state_save) in a versioned envelope with the model's fingerprint and a checksum,
 * written atomically (sessions.c says how). */
#ifndef ST_SERVER_SESSION_FILE_H
#define ST_SERVER_SESSION_FILE_H

#include <stddef.h>

#include "strata.h"

#define SV_STATE_DIR_DEFAULT "strata-sessions"

/* A plain file name inside the state folder: 1-64 letters, digits, '.', '_' or '-', not starting
 * with '.'. */
int sv_session_name_ok(const char *name);
#define SV_SESSION_NAME_RULE "a name must be 1-64 letters, digits, '.', '_' or '-', not starting with '.': a plain name inside the state folder"

/* Writes blob as DIR/NAME.session (creating DIR), atomically; *bytes gets the file's size.
 * ST_ERR_IO with the path and the reason when it cannot. */
st_status sv_session_file_write(const char *dir, const char *name, const char *fingerprint, const void *blob, size_t n,
                                size_t *bytes);
/* Reads DIR/NAME.session and checks its envelope: on success *file is the malloc'd file (free it)
 * and *blob, *n the payload inside it. A missing file is ST_ERR_IO with *missing = 1; a file that
 * is not a session, of another version or model, truncated, padded or altered is ST_ERR_FORMAT with
 * a message that says which. */
st_status sv_session_file_read(const char *dir, const char *name, const char *fingerprint, void **file, const void **blob,
                               size_t *n, int *missing);

#endif
