/* SPDX-License-Identifier: MIT */
/*
 * userfunctions.c - for people who rebuild CLIPS from source with Clara's
 * functions built in.
 *
 * Replace CLIPS's own userfunctions.c with this file, add
 * clips_bridge/clara_clips.c to the build, and link with -lclara. Every
 * environment CLIPS creates then has Clara's functions (clara-call,
 * clara-evaluate, json-get, ...). A program may still call
 * clara_clips_register(env) itself: registering twice is harmless. This is
 * how `make CLIPS_SRC=DIR` builds CLIPS 6.4x for clara-clips.
 *
 * Debian's prebuilt CLIPS already defines these hooks in libclips; with it,
 * call clara_clips_register(env) after CreateEnvironment() instead, as
 * clara_clips_main.c does.
 */
#include "clips.h"

#include "clara_clips.h"

#if defined(UNBOUNDED) && defined(UDFHasNextArgument) /* CLIPS 6.4x */

void UserFunctions(Environment *env) { (void)clara_clips_register(env); }

#else /* CLIPS 6.30 */

void UserFunctions(void);
void EnvUserFunctions(void *);

void UserFunctions(void) {}

void EnvUserFunctions(void *env) { (void)clara_clips_register(env); }

#endif
