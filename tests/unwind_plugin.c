/*
 * unwind_plugin.c — a library that test_unwind.c loads, unloads, and replaces
 * by another build of itself at the same address (tests.mk builds it twice).
 * plugin_call(cb, arg) calls cb(arg) from a frame whose size depends on the
 * build: 8 KiB with -DBIG_FRAME, none without. Written in assembly, with
 * the same instruction lengths in both builds, so that the return address
 * into plugin_call is the same byte offset in both: after the swap the
 * unwinder sees the same pc with a different rule, as with any library that
 * is reloaded (or replaced) at an address another one used.
 */
#if defined(__x86_64__)
#ifdef BIG_FRAME
#define FRAME "0x2000"
#else
#define FRAME "0x0"
#endif

__asm__(".text\n"
        ".globl plugin_call\n"
        ".type plugin_call, @function\n"
        "plugin_call:\n"
        ".cfi_startproc\n"
        "    .byte 0x48, 0x81, 0xec\n" /* sub $FRAME+8, %rsp (imm32 in both builds) */
        "    .long " FRAME " + 8\n"
        ".cfi_def_cfa_offset " FRAME " + 16\n"
        "    mov %rdi, %rax\n"
        "    mov %rsi, %rdi\n"
        "    call *%rax\n"
        "    .byte 0x48, 0x81, 0xc4\n" /* add $FRAME+8, %rsp */
        "    .long " FRAME " + 8\n"
        ".cfi_def_cfa_offset 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size plugin_call, .-plugin_call\n");
#endif
