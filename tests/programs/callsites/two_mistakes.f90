! Two I/O mistakes on known lines, for the call-site tests: each line marked
! "MISTAKE: <check> in <function>" is the statement the finding of that check
! is about.
!   1. write_elements writes an array one element per unformatted WRITE;
!   2. the main program opens, reads and closes params.txt again at each step.
! Usage: prog   (writes field.bin and params.txt in the current directory)
module fields
  implicit none
contains
  subroutine write_elements(a)
    real(8), intent(in) :: a(:)
    integer :: u, i
    open (newunit=u, file='field.bin', form='unformatted', access='sequential', &
          status='replace', action='write')
    do i = 1, size(a)
      write (u) a(i) ! MISTAKE: fortran-element-io in write_elements
    end do
    close (u)
  end subroutine write_elements
end module fields

program two_mistakes
  use fields
  implicit none
  integer, parameter :: n = 3000000, steps = 3000
  real(8), allocatable :: a(:)
  integer :: u, i
  real(8) :: dt, t
  allocate (a(n))
  do i = 1, n
    a(i) = 1.0d-3 * i
  end do
  call write_elements(a)
  open (newunit=u, file='params.txt', status='replace', action='write')
  write (u, '(a)') '0.001'
  close (u)
  t = 0
  do i = 1, steps
    ! the open, the read and the close of one re-read, as one line
    open (newunit=u, file='params.txt', action='read'); read (u, *) dt; close (u) ! MISTAKE: reopened-files in MAIN__
    t = t + dt
  end do
  print '(a,f0.3)', 't = ', t
end program two_mistakes
