! Fortran I/O shapes for the FORTRAN layer's tests:
!   fortran_io element N   unformatted stream WRITE of one value per statement
!   fortran_io whole N     one unformatted WRITE of the whole array
!   fortran_io lines N     formatted WRITE of one line per value, then READ back
!   fortran_io none        internal I/O and standard output only
!   fortran_io implicit N  unit 12 without OPEN (gfortran's fort.12), a scratch file
!   fortran_io threads N   (built with -fopenmp) 4 threads, each N one-value WRITEs
!                          to its own file threadK.bin
! Each writes its file(s) in the working directory and prints a checksum.
program fortran_io
  implicit none
  character(len=16) :: mode, arg
  integer :: n, i, u, stat
  real(8), allocatable :: a(:), b(:)
  character(len=32) :: text
  call get_command_argument(1, mode)
  call get_command_argument(2, arg)
  n = 0
  if (len_trim(arg) > 0) read(arg, *) n
  allocate(a(max(n, 1)), b(max(n, 1)))
  do i = 1, n
    a(i) = real(i, 8) * 0.5d0
  end do
  select case (trim(mode))
  case ('element')
    open(newunit=u, file='element.bin', access='stream', form='unformatted', &
         status='replace')
    do i = 1, n
      write(u) a(i)
    end do
    close(u)
  case ('whole')
    open(newunit=u, file='whole.bin', access='stream', form='unformatted', &
         status='replace')
    write(u) a
    close(u)
    open(newunit=u, file='whole.bin', access='stream', form='unformatted', status='old')
    read(u) b
    close(u)
    if (any(a /= b)) stop 3
  case ('lines')
    open(20, file='lines.txt', status='replace')
    do i = 1, n
      write(20, '(I8,1X,ES24.16)') i, a(i)
    end do
    close(20)
    open(21, file='lines.txt', status='old')
    do i = 1, n
      read(21, *, iostat=stat) u, b(i)
      if (stat /= 0) stop 4
    end do
    close(21)
    if (any(abs(a(1:n) - b(1:n)) > 1d-12)) stop 5
  case ('implicit')
    write(12) a(1:n)
    open(newunit=u, status='scratch', form='unformatted')
    write(u) a(1:n)
    rewind(u)
    read(u) b(1:n)
    close(u)
    if (any(a(1:n) /= b(1:n))) stop 6
  case ('threads')
    call threads(n)
  case ('none')
    do i = 1, max(n, 1)
      write(text, '(I10)') i
    end do
  case default
    stop 2
  end select
  print '(A,1X,ES24.16)', trim(mode), sum(a(1:max(n, 1)))
contains
  subroutine threads(n)
    integer, intent(in) :: n
    integer :: k, j, v
    character(len=16) :: fname
    !$omp parallel do private(j, v, fname) num_threads(4)
    do k = 0, 3
      write(fname, '(A,I0,A)') 'thread', k, '.bin'
      open(newunit=v, file=trim(fname), access='stream', form='unformatted', status='replace')
      do j = 1, n
        write(v) j
      end do
      close(v)
    end do
    !$omp end parallel do
  end subroutine threads
end program fortran_io
