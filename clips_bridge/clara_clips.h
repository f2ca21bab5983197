/* SPDX-License-Identifier: MIT */
/*
 * clara_clips.h - Clara's functions for CLIPS.
 *
 * clara_clips_register() adds Clara's user-defined functions to one CLIPS
 * environment; see docs/clips.md for what each returns:
 *
 *   (clara-evaluate ?json)   the response envelope of clara_evaluate(), a STRING
 *   (clara-emit ?json)       the envelope of clara_emit(): what the event fired
 *   (json-get ?json ?path)   the value at a gjson path: STRING, INTEGER, FLOAT,
 *                            the symbols TRUE/FALSE, the symbol nil for null or
 *                            missing, a STRING of JSON for arrays and objects
 *
 * The same source builds against CLIPS 6.30 (Debian's libclips-dev) and
 * CLIPS 6.4x; the version is chosen at compile time from the CLIPS headers.
 */
#ifndef CLARA_CLIPS_H
#define CLARA_CLIPS_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * clara_clips_register - define Clara's functions in a CLIPS environment.
 *
 * environment is the CLIPS environment (void * in CLIPS 6.30, Environment *
 * in 6.4x), for example the result of CreateEnvironment(). Call it once per
 * environment, before loading constructs that use the functions.
 *
 * Ownership: nothing is retained but the definitions inside the environment.
 * Threads:   CLIPS's rule applies: an environment is used by one thread at a
 *            time. Different environments may run on different threads and
 *            share Clara.
 * Returns:   0 (CLARA_OK) on success; -1 (-CLARA_EINVAL) when environment is
 *            NULL or CLIPS refused a definition.
 */
int clara_clips_register(void *environment);

#ifdef __cplusplus
}
#endif

#endif /* CLARA_CLIPS_H */
