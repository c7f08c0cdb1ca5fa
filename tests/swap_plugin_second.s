# The second plugin (tests/debug/capture_cache_in_forked_child.c and
# capture_cache_after_library_swap.c), loaded where the first was: entry() calls inner(), whose malloc call returns to the same
# address as the first plugin's (.text + 0x100) with the same stack pointer.
# inner() keeps no frame pointer and holds rbp + 32 MiB in rbp, as code built
# without frame pointers may: the first plugin's rule, replayed here, would
# take a frame 32 MiB above the stack. x86-64 only.
	.text
	.globl	entry
	.type	entry, @function
entry:
	.cfi_startproc
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	call	inner
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	entry, . - entry
	.type	inner, @function
inner:
	.cfi_startproc
	subq	$8, %rsp
	.cfi_def_cfa_offset 16
	movq	%rbp, (%rsp)
	.cfi_offset 6, -16
	leaq	0x2000000(%rsp), %rbp
	movl	$24, %edi
	jmp	1f
	.org	0x100 - 5
1:	call	malloc@PLT
	movq	(%rsp), %rbp
	.cfi_restore 6
	addq	$8, %rsp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size	inner, . - inner
	.org	0x200
	.section .note.GNU-stack, "", @progbits
