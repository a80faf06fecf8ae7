! Mistake: a 500 k-element array is saved as text, one formatted WRITE
! (es25.17) per line.  Converting every double to 25 characters of decimal
! text costs far more than moving its 8 bytes, and the file is 3x larger.
! Fix: unformatted stream I/O (access='stream'), one WRITE of the array;
! the numbers are the same bit for bit (a reader uses one READ).
! Usage: prog mistake|fixed   (writes field.txt or field.bin)
program formatted_lines
  implicit none
  integer, parameter :: n = 500000
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
    a(i) = sin(1.0d-3 * real(i, 8))
  end do

  if (mode == 'mistake') then
    open (newunit=u, file='field.txt', form='formatted', status='replace', action='write')
    do i = 1, n
      write (u, '(es25.17)') a(i)
    end do
  else
    open (newunit=u, file='field.bin', form='unformatted', access='stream', &
          status='replace', action='write')
    write (u) a
  end if
  close (u)
  write (*, '(a,i0,a)') 'wrote ', n, ' values'
end program formatted_lines
