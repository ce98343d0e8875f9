#include "textflag.h"

// func int80()
// An i386 ioctl(0, TIOCSTI, 0) through the 32-bit entry point; the jail's
// seccomp program kills the process for the foreign arch.
TEXT ·int80(SB),NOSPLIT,$0-0
	MOVL $54, AX
	MOVL $0, BX
	MOVL $0x5412, CX
	MOVL $0, DX
	INT $0x80
	RET
