! Mistake: a 2 M-element array is written to an unformatted sequential
! file one element per WRITE statement.  Each WRITE is a separate record
! (8 bytes of data between two 4-byte record markers) and a separate trip
! through the Fortran runtime's statement machinery; the runtime buffers
! the bytes, so the file system sees few large writes, but the program
! spends its time in 2 M WRITE statements.
! Fix: one WRITE of the whole array (one record of 16 MiB).  The numbers
! written are the same; a reader reads them with one READ of the array.
! Usage: prog mistake|fixed   (writes field.bin)
program element_writes
  implicit none
  integer, parameter :: n = 2 * 1024 * 1024
  real(8), allocatable :: a(:)
  character(len=16) :: mode
  integer :: i, u

  call get_command_argument(1, mode)
  if (mode /= 'mistake' .and. mode /= 'fixed') then
    write (*, '(a)') 'usage: prog mistake|fixed'
    stop 2
  end if
  allocate (a(n))
  do i = 1, n
    a(i) = 1.0d0 / real(i, 8)
  end do

  open (newunit=u, file='field.bin', form='unformatted', access='sequential', &
        status='replace', action='write')
  if (mode == 'mistake') then
    do i = 1, n
      write (u) a(i)
    end do
  else
    write (u) a
  end if
  close (u)
  write (*, '(a,i0,a)') 'wrote ', n, ' values'
end program element_writes
