# Another first plugin for tests/debug/capture_cache_after_library_swap.c, to
# be replaced by tests/swap_plugin_second.s at its address. entry() keeps no
# frame pointer: the unwind rule at its malloc call's return address
# (.text + 0x100) takes the caller's frame 32 bytes above the stack pointer,
# where the second plugin's entry() has its own return address, to the same
# caller. So the first plugin's walk, replayed on the second's stack, reads
# a plausible chain and gives a wrong trace (no entry() frame) instead of a
# fault. x86-64 only.
	.text
	.globl	entry
	.type	entry, @function
entry:
	.cfi_startproc
	subq	$24, %rsp
	.cfi_def_cfa_offset 32
	movl	$24, %edi
	jmp	1f
	.org	0x100 - 5
1:	call	malloc@PLT
	addq	$24, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	entry, . - entry
	.org	0x200
	.section .note.GNU-stack, "", @progbits
