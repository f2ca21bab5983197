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
 *   (clara-call TOOL [key value]... [:session S] [:policy P] [:id X] [:trace B])
 *                            a request built from CLIPS values; the envelope
 *   (clara-json ?text)       a value clara-call sends as the JSON it holds
 *   (clara-evaluate-json ?json) the envelope as a clara-json value
 *   (get-field ?response ?path) a field of the envelope, or else of its result
 *   (clara-stream facts|ROUTER|FALSE) streamed chats' text pieces at each
 *                            (clara-poll): clara-token facts, or printed
 *
 * The same source builds against CLIPS 6.30 (Debian's libclips-dev) and
 * CLIPS 6.4x; the version is chosen at compile time from the CLIPS headers.
 */
#ifndef CLARA_CLIPS_H
#define CLARA_CLIPS_H

/*
 * The CLIPS environment data position where clara_clips_register() keeps its
 * state for the environment (USER_ENVIRONMENT_DATA + 17; CLIPS leaves
 * positions 70 to 99 to extensions). If your program allocates environment
 * data at this position, compile clara_clips.c with another one, e.g.
 * -DCLARA_CLIPS_DATA_POSITION=95.
 */
#ifndef CLARA_CLIPS_DATA_POSITION
#define CLARA_CLIPS_DATA_POSITION 87
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * clara_clips_register - define Clara's functions in a CLIPS environment.
 *
 * environment is the CLIPS environment (void * in CLIPS 6.30, Environment *
 * in 6.4x), for example the result of CreateEnvironment(). Call it once per
 * environment, before loading constructs that use the functions. Calling it
 * again for the same environment (for example after userfunctions.c did)
 * changes nothing and returns 0.
 *
 * Ownership: the environment keeps Clara's definitions and a small state at
 *            environment data position CLARA_CLIPS_DATA_POSITION, both freed
 *            by DestroyEnvironment().
 * Threads:   CLIPS's rule applies: an environment is used by one thread at a
 *            time. Different environments may run on different threads and
 *            share Clara.
 * Returns:   0 (CLARA_OK) on success; -1 (-CLARA_EINVAL) when environment is
 *            NULL, when a function of one of Clara's names that is not
 *            Clara's is defined already (then none is defined), when the
 *            environment data position holds other data or the environment
 *            has no room for another external address type, or when CLIPS
 *            refused a definition.
 */
int clara_clips_register(void *environment);

/*
 * clara_clips_forward_events - the host program's own handler of Clara's
 * events (clara_set_event_handler()), kept while a CLIPS program streams.
 *
 * (clara-stream ...) makes the bridge Clara's event handler; it passes
 * every event on to fn (NULL: none). Call this instead of
 * clara_set_event_handler() in a program that loads CLIPS programs which
 * may stream: while none streams, it installs fn itself. fn has the
 * contract of clara_event_fn.
 * Threads:   any thread.
 */
void clara_clips_forward_events(void (*fn)(void *userdata, const char *event_json), void *userdata);

#ifdef __cplusplus
}
#endif

#endif /* CLARA_CLIPS_H */
