# The first of two plugins loaded one after the other at one address, in a
# forked child (tests/debug/capture_cache_in_forked_child.c) or in one process
# (tests/debug/capture_cache_after_library_swap.c). entry() keeps a
# frame pointer, so the unwind rule at its malloc call's return address
# (.text + 0x100) takes the caller's frame from rbp. x86-64 only.
	.text
	.globl	entry
	.type	entry, @function
entry:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset 6, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register 6
	subq	$16, %rsp
	movl	$24, %edi
	jmp	1f
	.org	0x100 - 5
1:	call	malloc@PLT
	leave
	.cfi_def_cfa 7, 8
	ret
	.cfi_endproc
	.size	entry, . - entry
	.org	0x200
	.section .note.GNU-stack, "", @progbits
